#pragma once
// The supervisor's writes into its segment: participant records, census reports and ledger
// rows, each through a SeqlockWriter that keeps the record's sequence privately for the
// supervisor's whole life, so nothing a reader (or a stray write) leaves in the segment
// ever steers a later write.

#include "ipc/seqlock.hpp"
#include "shared/records.hpp"
#include "shared/segment_layout.hpp"

#include <vector>

namespace comfy::supervisor {

class SegmentWriter {
public:
    // `view` is the segment this supervisor created (fresh, so every sequence starts at 0).
    explicit SegmentWriter(const SegmentView& view);

    void participant(std::uint32_t slot, const ParticipantRecord& record) noexcept { participants_[slot].write(record); }
    void census(std::uint32_t slot, const CensusReport& report) noexcept { census_reports_[slot].write(report); }
    void ledger(std::uint32_t row, const LedgerRecord& record) noexcept { ledger_[row].write(record); }

private:
    std::vector<ipc::SeqlockWriter<ParticipantRecord>> participants_;
    std::vector<ipc::SeqlockWriter<CensusReport>> census_reports_;
    std::vector<ipc::SeqlockWriter<LedgerRecord>> ledger_;
};

}  // namespace comfy::supervisor
