#pragma once
// Upstream's free_memory candidate order over the whole machine's ledger: entries on the
// device, not kept loaded, not the asker's own; sorted by most offloaded bytes first,
// then fewest references, then the smaller model, then the most recently loaded.
// (Not LRU: that is upstream's rule, reproduced as it is.)

#include "supervisor/arbiter/ledger.hpp"

#include <span>
#include <tuple>
#include <vector>

namespace comfy::arbiter {

struct EvictionQuery {
    std::uint32_t device = 0;
    std::uint32_t asker_slot = 0;
    std::span<const std::uint64_t> keep_loaded;  // machine_model_key()s of models to leave alone
};

// Which model a candidate is; looked up again when its turn comes, since the ledger may
// have changed by then.
struct EvictionCandidate {
    std::uint32_t owner_slot;
    std::uint32_t owner_generation;
    std::uint64_t model_id;
};

// The candidates in eviction order, handed out one at a time: building is linear and
// each pop costs a logarithm, because an admission usually stops after a few candidates
// and a full sort of thousands of entries would dominate the decision.
class EvictionQueue {
public:
    EvictionQueue() = default;
    EvictionQueue(const Ledger& ledger, const EvictionQuery& query);

    bool empty() const noexcept { return heap_.empty(); }
    EvictionCandidate pop();

private:
    // Ascending: more offloaded first (complemented), fewer references, smaller total,
    // then the more recent load (complemented load order).
    using Key = std::tuple<Bytes, std::uint32_t, Bytes, std::uint64_t>;
    struct Item {
        Key key;
        EvictionCandidate candidate;
    };
    std::vector<Item> heap_;
};

// The whole order at once (tests, tools): table indices of the candidates.
std::vector<std::size_t> eviction_order(const Ledger& ledger, const EvictionQuery& query);

}  // namespace comfy::arbiter
