#pragma once
// The simulated device: its size comes from the segment header and its accounting lives
// in the census slots, so free memory is machine-wide across processes. Pinned host
// memory is counted, not really locked, so a demo can pin gigabytes on a small machine.

#include "worker/census_writer.hpp"
#include "worker/device.hpp"

namespace comfy::worker {

class SimulatedDevice final : public Device {
public:
    SimulatedDevice(const SegmentView& view, CensusWriter& census);

    std::uint64_t total_bytes() const override;
    std::uint64_t free_bytes() const override;
    bool allocate(std::uint64_t bytes) override;
    void release(std::uint64_t bytes) override;
    bool pin_host(std::uint64_t bytes) override;
    void unpin_host(std::uint64_t bytes) override;
    std::uint64_t used_by_this_process() const override;
    std::uint64_t pinned_by_this_process() const override;

private:
    SegmentView view_;
    CensusWriter& census_;
};

}  // namespace comfy::worker
