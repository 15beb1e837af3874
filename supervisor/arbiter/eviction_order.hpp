#pragma once
// Upstream's free_memory candidate order over the whole machine's ledger: entries on the
// device, not kept loaded, not the asker's own; sorted by most offloaded bytes first,
// then fewest references, then the smaller model, then the most recently loaded.
// (Not LRU: that is upstream's rule, reproduced as it is.)

#include "supervisor/arbiter/ledger.hpp"

#include <span>
#include <vector>

namespace comfy::arbiter {

struct EvictionQuery {
    std::uint32_t device = 0;
    std::uint32_t asker_slot = 0;
    std::span<const std::uint64_t> keep_loaded;  // the asker's model ids to leave alone
};

// Table indices of the candidates, in the order they are asked to free memory.
std::vector<std::size_t> eviction_order(const Ledger& ledger, const EvictionQuery& query);

}  // namespace comfy::arbiter
