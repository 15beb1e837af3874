#pragma once
// A participant's own census slot: it keeps the record locally and publishes every
// change whole through the seqlock, so readers never see half an update.

#include "shared/participant_region.hpp"

namespace comfy::worker {

class CensusWriter {
public:
    // `slot` is in this life's fresh region.
    CensusWriter(CensusSlot& slot, std::uint32_t generation);

    const CensusRecord& record() const noexcept { return record_; }
    // Change the local copy, then publish() it.
    CensusRecord& edit() noexcept { return record_; }
    void publish() noexcept { writer_.write(record_); }

    // Called by the heartbeat thread only.
    void beat() noexcept;

private:
    CensusSlot& slot_;
    ipc::SeqlockWriter<CensusRecord> writer_;
    std::uint64_t beats_ = 0;  // ours; never read back from the region
    CensusRecord record_{};
};

}  // namespace comfy::worker
