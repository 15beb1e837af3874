#pragma once
// The simulated device: its size comes from the segment header and its accounting lives
// in the device table (shared/device_accounting.hpp), one row per participant, so free
// memory is machine-wide across processes. This process's own use is also in its census,
// for the supervisor and comfyctl. Pinned host memory is counted, not really locked, so a
// demo can pin gigabytes on a small machine.

#include "shared/device_accounting.hpp"
#include "worker/census_writer.hpp"
#include "worker/device.hpp"

namespace comfy::worker {

class SimulatedDevice final : public Device {
public:
    // Takes over row `slot` of `table` for the life `generation`.
    SimulatedDevice(const SegmentView& segment, const DeviceTable& table, std::uint32_t slot,
                    std::uint32_t generation, CensusWriter& census);

    std::uint64_t total_bytes() const override;
    std::uint64_t free_bytes() const override;
    bool allocate(std::uint64_t bytes) override;
    void release(std::uint64_t bytes) override;
    bool pin_host(std::uint64_t bytes) override;
    void unpin_host(std::uint64_t bytes) override;
    std::uint64_t used_by_this_process() const override;
    std::uint64_t pinned_by_this_process() const override;

private:
    // Publishes this process's use in its row and its census.
    void set_used(std::uint64_t bytes);

    SegmentView segment_;
    DeviceTable table_;
    DeviceUseRow& row_;
    CensusWriter& census_;
};

}  // namespace comfy::worker
