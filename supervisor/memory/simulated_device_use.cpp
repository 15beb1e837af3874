#include "supervisor/memory/simulated_device_use.hpp"

#include <algorithm>

namespace comfy::supervisor {

SimulatedDeviceUse::SimulatedDeviceUse(Bytes total_bytes, std::uint32_t participants, SegmentWriter& writes)
    : total_(total_bytes), by_slot_(participants, 0), writes_(writes) {}

bool SimulatedDeviceUse::allocate(std::uint32_t slot, Bytes bytes) {
    // used_ <= total_ always, so the subtraction cannot wrap, and an ask of any size is
    // compared without an addition that could.
    if (bytes > total_ - used_) return false;
    set(slot, by_slot_[slot] + bytes);
    return true;
}

void SimulatedDeviceUse::release(std::uint32_t slot, Bytes bytes) {
    set(slot, by_slot_[slot] - std::min(by_slot_[slot], bytes));
}

void SimulatedDeviceUse::forget(std::uint32_t slot) { set(slot, 0); }

void SimulatedDeviceUse::set(std::uint32_t slot, Bytes bytes) {
    used_ = used_ - by_slot_[slot] + bytes;
    by_slot_[slot] = bytes;
    writes_.device_used(used_);
}

}  // namespace comfy::supervisor
