#include "worker/simulated_device.hpp"

#include <algorithm>

namespace comfy::worker {

SimulatedDevice::SimulatedDevice(const SegmentView& segment, DeviceAccountant& accountant, CensusWriter& census)
    : segment_(segment), accountant_(accountant), census_(census) {}

std::uint64_t SimulatedDevice::total_bytes() const { return segment_.device_total_bytes(); }

std::uint64_t SimulatedDevice::free_bytes() const {
    const std::uint64_t total = total_bytes();
    // Relaxed: a figure shown as is, like the driver's; allocate() asks the supervisor
    // anyway, which decides with every participant's use.
    const std::uint64_t used = segment_.device().used_bytes.load(std::memory_order_relaxed);
    return used >= total ? 0 : total - used;
}

bool SimulatedDevice::allocate(std::uint64_t bytes) {
    if (bytes == 0) return true;  // nothing to ask for
    if (!accountant_.claim(bytes)) return false;
    set_used(used_by_this_process() + bytes);
    return true;
}

void SimulatedDevice::release(std::uint64_t bytes) {
    const std::uint64_t used = used_by_this_process();
    const std::uint64_t given = std::min(used, bytes);
    if (given == 0) return;
    set_used(used - given);
    accountant_.give_back(given);
}

void SimulatedDevice::set_used(std::uint64_t bytes) {
    census_.edit().device_used_bytes = bytes;
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
