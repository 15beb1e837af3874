#include "shared/device_accounting.hpp"

#include "shared/memory_arithmetic.hpp"

namespace comfy {

bool is_live_participant_state(std::uint8_t state) noexcept {
    return state == static_cast<std::uint8_t>(ParticipantState::spawning) ||
           state == static_cast<std::uint8_t>(ParticipantState::ready) ||
           state == static_cast<std::uint8_t>(ParticipantState::busy) ||
           state == static_cast<std::uint8_t>(ParticipantState::draining);
}

void DeviceUseTally::add(const ParticipantRecord& participant, std::uint32_t generation, std::uint64_t bytes) noexcept {
    if (!is_live_participant_state(participant.state) || generation != participant.generation) return;
    counted_bytes_ = saturating_add(counted_bytes_, bytes);
}

}  // namespace comfy
