#pragma once
// The simulated device: its size comes from the segment header, and its accounting is the
// supervisor's, as a GPU's is its driver's: every allocation is asked of the supervisor,
// which decides it against every participant's use (supervisor/memory/simulated_device_use.hpp)
// and publishes the device's use in the segment, where free_bytes() reads it. So free
// memory is exact machine-wide, and no participant can write another's use. This
// process's own use is also in its census, for the supervisor and comfyctl. Pinned host
// memory is counted, not really locked, so a demo can pin gigabytes on a small machine.

#include "shared/segment_layout.hpp"
#include "worker/census_writer.hpp"
#include "worker/device.hpp"

#include <cstdint>

namespace comfy::worker {

// How the simulated device reaches the supervisor (the worker runtime, over its rings).
class DeviceAccountant {
public:
    // Asks for `bytes` more for this life; whether the supervisor granted them.
    virtual bool claim(std::uint64_t bytes) = 0;
    // Says that this life gave `bytes` back.
    virtual void give_back(std::uint64_t bytes) = 0;

protected:
    ~DeviceAccountant() = default;
};

class SimulatedDevice final : public Device {
public:
    SimulatedDevice(const SegmentView& segment, DeviceAccountant& accountant, CensusWriter& census);

    std::uint64_t total_bytes() const override;
    std::uint64_t free_bytes() const override;
    bool allocate(std::uint64_t bytes) override;
    void release(std::uint64_t bytes) override;
    bool pin_host(std::uint64_t bytes) override;
    void unpin_host(std::uint64_t bytes) override;
    std::uint64_t used_by_this_process() const override;
    std::uint64_t pinned_by_this_process() const override;

private:
    // Publishes this process's use in its census.
    void set_used(std::uint64_t bytes);

    SegmentView segment_;
    DeviceAccountant& accountant_;
    CensusWriter& census_;
};

}  // namespace comfy::worker
