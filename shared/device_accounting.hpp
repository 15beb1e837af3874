#pragma once
// The simulated device's machine-wide accounting: each participant publishes its own
// device use in its census slot (one writer each), so "used" is the sum over all slots,
// as the CUDA driver reports device-wide use on Linux. A dead participant's slot is
// zeroed by the supervisor, which returns its allocations.

#include "shared/segment_layout.hpp"

#include <cstdint>

namespace comfy {

// Sum of device_used_bytes over every census slot. A slot that stays unreadable (its
// writer stopped mid-write) makes the whole device count as used: never overcommit.
std::uint64_t simulated_device_used(const SegmentView& view);

}  // namespace comfy
