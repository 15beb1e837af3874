#include "worker/simulated_device.hpp"

#include "shared/device_accounting.hpp"

#include <algorithm>

namespace comfy::worker {

SimulatedDevice::SimulatedDevice(const SegmentView& view, CensusWriter& census) : view_(view), census_(census) {}

std::uint64_t SimulatedDevice::total_bytes() const { return view_.device_total_bytes(); }

std::uint64_t SimulatedDevice::free_bytes() const { return simulated_device_free(view_); }

bool SimulatedDevice::allocate(std::uint64_t bytes) {
    if (bytes > free_bytes()) return false;
    // Publish first, then re-check: two processes allocating at once may both back off,
    // but the device is never overcommitted (as with a real driver, an OOM is possible).
    census_.edit().device_used_bytes += bytes;
    census_.publish();
    if (simulated_device_used(view_) > total_bytes()) {
        census_.edit().device_used_bytes -= bytes;
        census_.publish();
        return false;
    }
    return true;
}

void SimulatedDevice::release(std::uint64_t bytes) {
    auto& used = census_.edit().device_used_bytes;
    used -= std::min(used, bytes);
    census_.publish();
}

bool SimulatedDevice::pin_host(std::uint64_t bytes) {
    census_.edit().pinned_bytes += bytes;
    census_.publish();
    return true;
}

void SimulatedDevice::unpin_host(std::uint64_t bytes) {
    auto& pinned = census_.edit().pinned_bytes;
    pinned -= std::min(pinned, bytes);
    census_.publish();
}

std::uint64_t SimulatedDevice::used_by_this_process() const { return census_.record().device_used_bytes; }

std::uint64_t SimulatedDevice::pinned_by_this_process() const { return census_.record().pinned_bytes; }

}  // namespace comfy::worker
