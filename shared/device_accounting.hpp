#pragma once
// The simulated device's "used" as a reader of the segment's census reports counts it
// (comfyctl): the sum of what every live participant's census says it uses on the device,
// as the CUDA driver reports device-wide use on Linux. The supervisor itself decides every
// allocation on the simulated device and keeps its own account
// (supervisor/memory/simulated_device_use.hpp); this is the readers' view of it.
//
// The one rule for which reports count: a report's bytes count when its participant record
// (the supervisor's) is in a live state (spawning, ready, busy or draining) and the report
// carries the record's generation. A report left by an earlier life of the slot does not
// count, nor does one whose participant is empty, dead or failed: a dead process's
// allocations went with it. Sums saturate at UINT64_MAX: a report can claim anything, and
// a wrapped sum would lie.

#include "shared/records.hpp"

#include <cstdint>

namespace comfy {

// Spawning, ready, busy or draining: a process may be running and holding memory.
bool is_live_participant_state(std::uint8_t state) noexcept;

// A running sum by the rule above.
class DeviceUseTally {
public:
    // Bytes claimed by the life `generation` of the participant `participant` describes.
    void add(const ParticipantRecord& participant, std::uint32_t generation, std::uint64_t bytes) noexcept;

    // The sum over what was added; what is known to be in use.
    std::uint64_t counted_bytes() const noexcept { return counted_bytes_; }

private:
    std::uint64_t counted_bytes_ = 0;
};

}  // namespace comfy
