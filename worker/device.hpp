#pragma once
// A device as a worker sees it: machine-wide free memory, allocations, pinned host memory.
// Backends: the simulated device (tests, demo, machines without a GPU) and CUDA.

#include <cstdint>

namespace comfy::worker {

class Device {
public:
    virtual ~Device() = default;
    virtual std::uint64_t total_bytes() const = 0;
    // Free on the whole device, as the driver reports it: other processes' use included.
    virtual std::uint64_t free_bytes() const = 0;
    // Reserves `bytes` of device memory for this process; false when they do not fit.
    virtual bool allocate(std::uint64_t bytes) = 0;
    virtual void release(std::uint64_t bytes) = 0;
    // Pins `bytes` of host memory; false when the pin fails.
    virtual bool pin_host(std::uint64_t bytes) = 0;
    virtual void unpin_host(std::uint64_t bytes) = 0;
    // What this process holds on the device and pinned on the host.
    virtual std::uint64_t used_by_this_process() const = 0;
    virtual std::uint64_t pinned_by_this_process() const = 0;
};

}  // namespace comfy::worker
