#include "supervisor/arbiter/standin_unloads.hpp"

#include <algorithm>

namespace comfy::arbiter {

template <class Match>
std::vector<PendingStandIn> StandInUnloads::take_if(Match match) {
    std::vector<PendingStandIn> taken;
    std::erase_if(pending_, [&](const PendingStandIn& p) {
        if (!match(p)) return false;
        taken.push_back(p);
        return true;
    });
    return taken;
}

bool StandInUnloads::in_flight(std::uint32_t owner_slot, std::uint64_t model_id) const {
    return std::any_of(pending_.begin(), pending_.end(), [&](const PendingStandIn& p) {
        return p.owner.slot == owner_slot && p.model_id == model_id;
    });
}

std::vector<PendingStandIn> StandInUnloads::take_for_model(std::uint32_t owner_slot, std::uint64_t model_id) {
    return take_if([&](const PendingStandIn& p) { return p.owner.slot == owner_slot && p.model_id == model_id; });
}

std::vector<PendingStandIn> StandInUnloads::take_for_owner(std::uint32_t slot) {
    return take_if([&](const PendingStandIn& p) { return p.owner.slot == slot; });
}

std::vector<PendingStandIn> StandInUnloads::take_expired(std::uint64_t now_ms, std::uint64_t timeout_ms) {
    return take_if([&](const PendingStandIn& p) { return now_ms - p.since_ms >= timeout_ms; });
}

std::size_t StandInUnloads::drop_asker(std::uint32_t slot) {
    return std::erase_if(pending_, [&](const PendingStandIn& p) { return p.asker.slot == slot; });
}

std::size_t StandInUnloads::unanswered(std::uint32_t slot) const {
    return static_cast<std::size_t>(
        std::count_if(pending_.begin(), pending_.end(), [&](const PendingStandIn& p) { return p.asker.slot == slot; }));
}

}  // namespace comfy::arbiter
