#pragma once
// The supervisor's writes into its segment: participant records, census reports, ledger
// rows and the simulated device's figures, each also into the segment's published copy
// (ipc/published_copy.hpp), which the processes that find the segment by name read. Each
// record goes through a SeqlockWriter that keeps its sequence privately for the
// supervisor's whole life, so nothing a reader (or a stray write) leaves in the segment or
// its copy ever steers a later write.

#include "ipc/seqlock.hpp"
#include "shared/memory_arithmetic.hpp"
#include "shared/records.hpp"
#include "shared/segment_layout.hpp"

#include <vector>

namespace comfy::supervisor {

class SegmentWriter {
public:
    // `view` is the segment this supervisor created and `published` its published copy
    // (both fresh, so every sequence starts at 0); the copy stays at its address for life.
    SegmentWriter(const SegmentView& view, const SegmentView& published);

    void participant(std::uint32_t slot, const ParticipantRecord& record) noexcept {
        participants_[slot].write(record);
    }
    void census(std::uint32_t slot, const CensusReport& report) noexcept { census_reports_[slot].write(report); }
    void ledger(std::uint32_t row, const LedgerRecord& record) noexcept { ledger_[row].write(record); }
    // After a batch of ledger() writes: readers that check the ledger's generation read it
    // again (shared/segment_layout.hpp, LedgerGeneration).
    void ledger_changed() noexcept;
    // The simulated device's use, as the supervisor decided it.
    void device_used(Bytes bytes) noexcept;

private:
    // One record, written into the segment and then into its copy.
    template <class T>
    struct Mirrored {
        ipc::SeqlockWriter<T> segment;
        ipc::SeqlockWriter<T> copy;
        void write(const T& value) noexcept {
            segment.write(value);
            copy.write(value);
        }
    };

    DeviceFigures& device_;
    DeviceFigures& published_device_;
    LedgerGeneration& ledger_generation_;
    LedgerGeneration& published_ledger_generation_;
    // Kept here, never read back from the segment, which a stray write could change.
    std::uint64_t ledger_generation_value_ = 0;
    std::vector<Mirrored<ParticipantRecord>> participants_;
    std::vector<Mirrored<CensusReport>> census_reports_;
    std::vector<Mirrored<LedgerRecord>> ledger_;
};

}  // namespace comfy::supervisor
