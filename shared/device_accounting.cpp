#include "shared/device_accounting.hpp"

#include "shared/memory_arithmetic.hpp"

#include <atomic>

namespace comfy {

bool is_live_participant_state(std::uint8_t state) noexcept {
    return state == static_cast<std::uint8_t>(ParticipantState::spawning) ||
           state == static_cast<std::uint8_t>(ParticipantState::ready) ||
           state == static_cast<std::uint8_t>(ParticipantState::busy) ||
           state == static_cast<std::uint8_t>(ParticipantState::draining);
}

bool census_counts_toward_device(const ParticipantRecord& participant, const CensusRecord& census) noexcept {
    return is_live_participant_state(participant.state) && census.generation == participant.generation;
}

void DeviceUseTally::add(const ParticipantRecord& participant, const CensusRecord& census) noexcept {
    if (!census_counts_toward_device(participant, census)) return;
    counted_bytes_ = saturating_add(counted_bytes_, census.device_used_bytes);
}

std::uint64_t simulated_device_used(const SegmentView& view) {
    // Seq_cst: a caller that has just published its own census (allocate() does, then
    // re-checks) must not have its reads below ordered before that publication, or two
    // workers allocating at once could each miss the other's use. With this fence in
    // both, at least one of them sees the other's census.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    DeviceUseTally tally;
    for (std::uint32_t slot = 0; slot < view.capacities().participants; ++slot) {
        CensusRecord census{};
        if (view.census(slot).census.read(census) != ipc::SeqlockRead::ok) {
            return view.device_total_bytes();  // the device counts as full, whatever the other slots hold
        }
        // A census claiming nothing adds nothing whatever its participant: no need to
        // read (and perhaps wait on) the supervisor's record.
        if (census.device_used_bytes == 0) continue;
        ParticipantRecord participant{};
        if (view.participant(slot).record.read(participant) != ipc::SeqlockRead::ok) {
            return view.device_total_bytes();
        }
        tally.add(participant, census);
    }
    return tally.counted_bytes();
}

std::uint64_t simulated_device_free(const SegmentView& view) {
    const std::uint64_t total = view.device_total_bytes();
    const std::uint64_t used = simulated_device_used(view);
    return used >= total ? 0 : total - used;
}

}  // namespace comfy
