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

std::uint64_t simulated_device_used(const SegmentView& segment, const DeviceTable& table) {
    // Seq_cst: a caller that has just published its own use (allocate() does, then
    // re-checks) must not have its reads below ordered before that publication, or two
    // workers allocating at once could each miss the other's use. With this fence in
    // both, at least one of them sees the other's row.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    DeviceUseTally tally;
    for (std::uint32_t slot = 0; slot < table.participants(); ++slot) {
        const DeviceUseRow& row = table.row(slot);
        // Acquire: pairs with the writer's release store of its generation, so the bytes
        // read next are that life's (it wrote 0 before announcing itself).
        const std::uint32_t generation = row.generation.load(std::memory_order_acquire);
        // Relaxed: ordered after the generation by the acquire above.
        const std::uint64_t bytes = row.used_bytes.load(std::memory_order_relaxed);
        // A row claiming nothing adds nothing: no need to read (and perhaps wait on) the
        // supervisor's record.
        if (bytes == 0 || generation == 0) continue;
        ParticipantRecord participant{};
        if (segment.participant(slot).record.read(participant) != ipc::SeqlockRead::ok) {
            return segment.device_total_bytes();
        }
        tally.add(participant, generation, bytes);
    }
    return tally.counted_bytes();
}

std::uint64_t simulated_device_free(const SegmentView& segment, const DeviceTable& table) {
    const std::uint64_t total = segment.device_total_bytes();
    const std::uint64_t used = simulated_device_used(segment, table);
    return used >= total ? 0 : total - used;
}

}  // namespace comfy
