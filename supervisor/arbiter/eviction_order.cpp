#include "supervisor/arbiter/eviction_order.hpp"

#include <algorithm>
#include <iterator>

namespace comfy::arbiter {

EvictionQueue::EvictionQueue(const EvictionQuery& query)
    : device_(query.device), keep_loaded_(query.keep_loaded.begin(), query.keep_loaded.end()) {
    std::sort(keep_loaded_.begin(), keep_loaded_.end());
}

const LedgerEntry* EvictionCandidate::in(const Ledger& ledger) const {
    const auto& entry = ledger.at(row);
    const bool same = entry && entry->owner_slot == owner_slot && entry->owner_generation == owner_generation &&
                      entry->model_id == model_id;
    return same ? &*entry : nullptr;
}

std::optional<EvictionCandidate> EvictionQueue::next(const Ledger& ledger) {
    const auto& order = ledger.order();
    // The device's entries start at the smallest key with its number; everything before
    // the last place handed out was handed out or passed over, and still is if nothing moved.
    const Ledger::OrderKey first{device_, 0, 0, 0, 0};
    const bool resume = walked_ == &order && walked_version_ == ledger.order_version();
    for (auto it = resume ? resume_ : order.lower_bound({first, 0});
         it != order.end() && std::get<0>(it->first) == device_; ++it) {
        const std::size_t row = it->second;
        if (!ledger.at(row)) continue;  // a tombstone
        const LedgerEntry& entry = *ledger.at(row);
        // By the model, not the row: a row freed and reused meanwhile holds another model.
        const HandedOut model{entry.owner_slot, entry.owner_generation, entry.model_id};
        if (handed_out_.count(model)) continue;
        if (std::binary_search(keep_loaded_.begin(), keep_loaded_.end(), machine_model_key(entry.owner_slot, entry.model_id))) {
            continue;
        }
        handed_out_.insert(model);
        walked_ = &order;
        walked_version_ = ledger.order_version();
        resume_ = std::next(it);
        return EvictionCandidate{entry.owner_slot, entry.owner_generation, entry.model_id, row};
    }
    return std::nullopt;
}

std::vector<std::size_t> eviction_order(const Ledger& ledger, const EvictionQuery& query) {
    std::vector<std::size_t> order;
    EvictionQueue queue(query);
    while (const auto c = queue.next(ledger)) order.push_back(c->row);
    return order;
}

}  // namespace comfy::arbiter
