#pragma once
// Upstream's free_memory candidate order over the whole machine's ledger, as over its one
// current_loaded_models list: every entry on the device that is not kept loaded, the
// asker's own included; sorted by most offloaded bytes first, then fewest references,
// then the smaller model, then the most recently used. (Not LRU: that is upstream's
// rule, reproduced as it is.)

#include "supervisor/arbiter/ledger.hpp"

#include <optional>
#include <set>
#include <tuple>
#include <span>
#include <vector>

namespace comfy::arbiter {

struct EvictionQuery {
    std::uint32_t device = 0;
    std::span<const std::uint64_t> keep_loaded;  // machine_model_key()s of models to leave alone
};

// Which model a candidate is, and the table row it had; checked again when its turn
// comes, since the ledger may have changed by then (an entry keeps its row while it lives).
struct EvictionCandidate {
    std::uint32_t owner_slot;
    std::uint32_t owner_generation;
    std::uint64_t model_id;
    std::size_t row;

    // The entry, if the row still holds this candidate.
    const LedgerEntry* in(const Ledger& ledger) const;
};

// The candidates of one admission, handed out one at a time from the ledger's live order
// (Ledger::order), skipping kept ones, tombstones and those already handed out. An
// admission usually stops after a few candidates, so it never pays for ordering the whole
// ledger. While the order is unchanged each call resumes after the last candidate; once an
// entry changes (an owner reports) the walk starts again from the front, so a changed
// entry is met at its new place; a model handed out is not asked again.
class EvictionQueue {
public:
    EvictionQueue() = default;
    explicit EvictionQueue(const EvictionQuery& query);

    // The next candidate in `ledger`, or nothing when none is left.
    std::optional<EvictionCandidate> next(const Ledger& ledger);

private:
    std::uint32_t device_ = 0;
    std::vector<std::uint64_t> keep_loaded_;  // sorted: a load may keep thousands
    using HandedOut = std::tuple<std::uint32_t, std::uint32_t, std::uint64_t>;  // owner slot, generation, model
    std::set<HandedOut> handed_out_;
    // Where the walk stopped, valid while that order (not a copy of it) has not changed.
    const Ledger::Order* walked_ = nullptr;
    std::uint64_t walked_version_ = 0;
    Ledger::Order::const_iterator resume_;
};

// The whole order at once (tests, tools): table indices of the candidates.
std::vector<std::size_t> eviction_order(const Ledger& ledger, const EvictionQuery& query);

}  // namespace comfy::arbiter
