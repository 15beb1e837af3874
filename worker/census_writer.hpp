#pragma once
// A participant's own census slot: it keeps the record locally and publishes every
// change whole through the seqlock, so readers never see half an update.

#include "shared/segment_layout.hpp"

namespace comfy::worker {

class CensusWriter {
public:
    CensusWriter(CensusSlot& slot, std::uint32_t generation);

    const CensusRecord& record() const noexcept { return record_; }
    // Change the local copy, then publish() it.
    CensusRecord& edit() noexcept { return record_; }
    void publish() noexcept { slot_.census.write(record_); }

    // Called by the heartbeat thread only.
    void beat() noexcept;

private:
    CensusSlot& slot_;
    CensusRecord record_{};
};

}  // namespace comfy::worker
