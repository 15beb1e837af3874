#include "worker/node_leftovers.hpp"

#include <algorithm>

namespace comfy::worker {

NodeLeftovers::Held NodeLeftovers::growth(std::uint64_t epoch, std::uint32_t node, Held at_least) const {
    const auto found = held_.find({epoch, node});
    const Held held = found == held_.end() ? Held{} : found->second;
    return {at_least.cast - std::min(at_least.cast, held.cast), at_least.pins - std::min(at_least.pins, held.pins)};
}

void NodeLeftovers::add(std::uint64_t epoch, std::uint32_t node, Held added) {
    if (added.cast == 0 && added.pins == 0) return;
    held_[{epoch, node}] += added;
}

NodeLeftovers::Held NodeLeftovers::take_node(std::uint64_t epoch, std::uint32_t node) {
    const auto found = held_.find({epoch, node});
    if (found == held_.end()) return {};
    const Held taken = found->second;
    held_.erase(found);
    return taken;
}

NodeLeftovers::Held NodeLeftovers::take_before(std::uint64_t epoch) {
    Held taken;
    // Keys sort by epoch first: everything of an earlier prompt comes before the first key of `epoch`.
    const auto end = held_.lower_bound({epoch, 0});
    for (auto it = held_.begin(); it != end; ++it) taken += it->second;
    held_.erase(held_.begin(), end);
    return taken;
}

NodeLeftovers::Held NodeLeftovers::take_all() {
    const Held taken = total();
    held_.clear();
    return taken;
}

Bytes NodeLeftovers::take_cast(Bytes bytes) {
    Bytes taken = 0;
    for (auto& [key, held] : held_) {
        if (taken >= bytes) break;
        taken += std::exchange(held.cast, 0);
    }
    std::erase_if(held_, [](const auto& entry) { return entry.second.cast == 0 && entry.second.pins == 0; });
    return taken;
}

Bytes NodeLeftovers::take_pins(Bytes bytes) {
    Bytes taken = 0;
    for (auto& [key, held] : held_) {
        const Bytes part = std::min(bytes - taken, held.pins);
        held.pins -= part;
        taken += part;
    }
    std::erase_if(held_, [](const auto& entry) { return entry.second.cast == 0 && entry.second.pins == 0; });
    return taken;
}

NodeLeftovers::Held NodeLeftovers::total() const {
    Held sum;
    for (const auto& [key, held] : held_) sum += held;
    return sum;
}

}  // namespace comfy::worker
