#include "supervisor/arbiter/eviction_order.hpp"

#include <algorithm>

namespace comfy::arbiter {

EvictionQueue::EvictionQueue(const EvictionQuery& query)
    : device_(query.device), asker_slot_(query.asker_slot), keep_loaded_(query.keep_loaded.begin(), query.keep_loaded.end()) {}

std::optional<EvictionCandidate> EvictionQueue::next(const Ledger& ledger) {
    const auto& order = ledger.order();
    // The device's entries start at the smallest key with its number.
    const Ledger::OrderKey first{device_, 0, 0, 0, 0};
    for (auto it = order.lower_bound({first, 0}); it != order.end() && std::get<0>(it->first) == device_; ++it) {
        const std::size_t row = it->second;
        if (handed_out_.count(row)) continue;
        const LedgerEntry& entry = *ledger.at(row);
        // The asker's own models are its own ComfyUI's business: it ran upstream's
        // free_memory on them, against the machine-wide free we publish, before asking.
        if (entry.owner_slot == asker_slot_) continue;
        const auto key = machine_model_key(entry.owner_slot, entry.model_id);
        if (std::find(keep_loaded_.begin(), keep_loaded_.end(), key) != keep_loaded_.end()) continue;
        handed_out_.insert(row);
        return EvictionCandidate{entry.owner_slot, entry.owner_generation, entry.model_id};
    }
    return std::nullopt;
}

std::vector<std::size_t> eviction_order(const Ledger& ledger, const EvictionQuery& query) {
    std::vector<std::size_t> order;
    EvictionQueue queue(query);
    while (const auto c = queue.next(ledger)) order.push_back(*ledger.find(c->owner_slot, c->owner_generation, c->model_id));
    return order;
}

}  // namespace comfy::arbiter
