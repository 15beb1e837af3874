#include "supervisor/arbiter/eviction_order.hpp"

#include <algorithm>

namespace comfy::arbiter {

namespace {
// std::push_heap and friends keep the largest on top; we pop the smallest key first.
struct LaterInOrder {
    template <class Item>
    bool operator()(const Item& a, const Item& b) const {
        return b.key < a.key;
    }
};
}  // namespace

EvictionQueue::EvictionQueue(const Ledger& ledger, const EvictionQuery& query) {
    heap_.reserve(ledger.size());
    for (std::size_t i = 0; i < ledger.capacity(); ++i) {
        const auto& entry = ledger.at(i);
        if (!entry || entry->device != query.device) continue;
        // The asker's own models are its own ComfyUI's business: it ran upstream's
        // free_memory on them, against the machine-wide free we publish, before asking.
        if (entry->owner_slot == query.asker_slot) continue;
        const auto key = machine_model_key(entry->owner_slot, entry->model_id);
        if (std::find(query.keep_loaded.begin(), query.keep_loaded.end(), key) != query.keep_loaded.end()) continue;
        heap_.push_back({{~entry->offloaded_bytes(), entry->references, entry->total_bytes, ~entry->load_order},
                         {entry->owner_slot, entry->owner_generation, entry->model_id}});
    }
    std::make_heap(heap_.begin(), heap_.end(), LaterInOrder{});
}

EvictionCandidate EvictionQueue::pop() {
    std::pop_heap(heap_.begin(), heap_.end(), LaterInOrder{});
    const EvictionCandidate next = heap_.back().candidate;
    heap_.pop_back();
    return next;
}

std::vector<std::size_t> eviction_order(const Ledger& ledger, const EvictionQuery& query) {
    std::vector<std::size_t> order;
    EvictionQueue queue(ledger, query);
    while (!queue.empty()) {
        const auto c = queue.pop();
        order.push_back(*ledger.find(c.owner_slot, c.owner_generation, c.model_id));
    }
    return order;
}

}  // namespace comfy::arbiter
