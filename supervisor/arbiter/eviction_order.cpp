#include "supervisor/arbiter/eviction_order.hpp"

#include <algorithm>
#include <tuple>

namespace comfy::arbiter {

std::vector<std::size_t> eviction_order(const Ledger& ledger, const EvictionQuery& query) {
    std::vector<std::size_t> candidates;
    for (std::size_t i = 0; i < ledger.capacity(); ++i) {
        const auto& entry = ledger.at(i);
        if (!entry || entry->device != query.device) continue;
        // The asker's own models are its own ComfyUI's business: it ran upstream's
        // free_memory on them, against the machine-wide free we publish, before asking.
        if (entry->owner_slot == query.asker_slot) continue;
        if (std::find(query.keep_loaded.begin(), query.keep_loaded.end(), entry->model_id) != query.keep_loaded.end()) {
            continue;
        }
        candidates.push_back(i);
    }
    const auto key = [&](std::size_t i) {
        const LedgerEntry& e = *ledger.at(i);
        // Ascending tuple: more offloaded first (negated), fewer references, smaller
        // total, then the more recent load (negated load order).
        return std::make_tuple(~e.offloaded_bytes(), e.references, e.total_bytes, ~e.load_order);
    };
    std::stable_sort(candidates.begin(), candidates.end(), [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
    return candidates;
}

}  // namespace comfy::arbiter
