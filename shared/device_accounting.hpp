#pragma once
// The simulated device's machine-wide accounting: each participant publishes its own
// device use in its census slot (one writer each), and "used" is the sum over the slots,
// as the CUDA driver reports device-wide use on Linux.
//
// The one rule for which slots count: a slot's device_used_bytes counts when its
// participant record is in a live state (spawning, ready, busy or draining) and its
// census carries the participant record's generation. A census left by an earlier life
// of the slot does not count, nor does one in a slot whose participant is empty, dead or
// failed: the supervisor zeroes a dead participant's census (returning its allocations)
// before anything else, so such a census never holds memory that is still allocated. A
// running worker always counts: the supervisor publishes its generation and a live state
// before starting it, and marks it dead or failed only after it has exited.
//
// Sums saturate at UINT64_MAX: a census can claim anything, and a wrapped sum would lie.

#include "shared/records.hpp"
#include "shared/segment_layout.hpp"

#include <cstdint>

namespace comfy {

// Spawning, ready, busy or draining: a process may be running and holding memory.
bool is_live_participant_state(std::uint8_t state) noexcept;

// Whether the rule above counts `census` for the participant in the same slot.
bool census_counts_toward_device(const ParticipantRecord& participant, const CensusRecord& census) noexcept;

// A running sum by the rule above, for a reader that reads the records itself (comfyctl
// reads them once, with its own retry policy, and shows them too).
class DeviceUseTally {
public:
    // A slot whose participant record and census were both read whole.
    void add(const ParticipantRecord& participant, const CensusRecord& census) noexcept;

    // The sum over the slots read whole; what is known to be in use.
    std::uint64_t counted_bytes() const noexcept { return counted_bytes_; }

private:
    std::uint64_t counted_bytes_ = 0;
};

// The device's "used" for allocation decisions (the worker's allocate() re-checks it
// after publishing its own use; the supervisor records its peak): the tally over every
// slot, worst case. A record that stays mid-write through a seqlock's default retries
// (its writer stopped or died inside a write) makes the device count as full: never
// overcommit. A participant record is read only for a slot whose census claims bytes.
std::uint64_t simulated_device_used(const SegmentView& view);
// The device's total less that "used", never below zero: what the driver would report free.
std::uint64_t simulated_device_free(const SegmentView& view);

}  // namespace comfy
