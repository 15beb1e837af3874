#include "worker/simulated_device.hpp"

#include <algorithm>

namespace comfy::worker {

SimulatedDevice::SimulatedDevice(const SegmentView& segment, const DeviceTable& table, std::uint32_t slot,
                                 std::uint32_t generation, CensusWriter& census)
    : segment_(segment), table_(table), row_(table.row(slot)), census_(census) {
    // Relaxed: published by the release store of the generation just below.
    row_.used_bytes.store(0, std::memory_order_relaxed);
    // Release: a reader that sees this generation sees the zero above, never an earlier
    // life's bytes under this life's name.
    row_.generation.store(generation, std::memory_order_release);
}

std::uint64_t SimulatedDevice::total_bytes() const { return segment_.device_total_bytes(); }

std::uint64_t SimulatedDevice::free_bytes() const { return simulated_device_free(segment_, table_); }

bool SimulatedDevice::allocate(std::uint64_t bytes) {
    if (bytes > free_bytes()) return false;
    // Publish first, then re-check: two processes allocating at once may both back off,
    // but the device is never overcommitted (as with a real driver, an OOM is possible).
    const std::uint64_t before = used_by_this_process();
    set_used(before + bytes);
    if (simulated_device_used(segment_, table_) > total_bytes()) {
        set_used(before);
        return false;
    }
    return true;
}

void SimulatedDevice::release(std::uint64_t bytes) {
    const std::uint64_t used = used_by_this_process();
    set_used(used - std::min(used, bytes));
}

void SimulatedDevice::set_used(std::uint64_t bytes) {
    // Relaxed: simulated_device_used()'s seq_cst fence orders it before an allocation's
    // re-check, and other readers only need the value eventually.
    row_.used_bytes.store(bytes, std::memory_order_relaxed);
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
