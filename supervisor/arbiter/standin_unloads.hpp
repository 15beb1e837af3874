#pragma once
// The host's stand-in unloads waiting for their owner's answer. Upstream's own eviction in
// the ComfyUI host (free_memory, unload_all_models) called partially_unload or detach on a
// stand-in entry; the arbiter sent the owner the command, or found one already on its way
// for that model, and keeps the host's request here until the owner's receipt, its death
// or the answer timeout decides what the stand-in returns.

#include "supervisor/arbiter/arbiter_io.hpp"

#include <cstdint>
#include <vector>

namespace comfy::arbiter {

struct PendingStandIn {
    Participant asker;
    std::uint64_t correlation;
    Participant owner;
    std::uint64_t model_id;
    std::uint64_t since_ms;
};

class StandInUnloads {
public:
    void add(PendingStandIn pending) { pending_.push_back(pending); }

    // Whether a stand-in unload of this model is already waiting for its owner.
    bool in_flight(std::uint32_t owner_slot, std::uint64_t model_id) const;
    // The requests the owner's receipt for `model_id` answers, taken out.
    std::vector<PendingStandIn> take_for_model(std::uint32_t owner_slot, std::uint64_t model_id);
    // The requests whose owner is `slot`, taken out (it died: nothing of it is loaded).
    std::vector<PendingStandIn> take_for_owner(std::uint32_t slot);
    // Those waited on since `timeout_ms` or longer before `now_ms`, taken out.
    std::vector<PendingStandIn> take_expired(std::uint64_t now_ms, std::uint64_t timeout_ms);
    // Forgets the requests of an asker that left; returns how many.
    std::size_t drop_asker(std::uint32_t slot);
    // Requests of the asker in `slot` not answered yet.
    std::size_t unanswered(std::uint32_t slot) const;
    std::size_t size() const noexcept { return pending_.size(); }

private:
    template <class Match>
    std::vector<PendingStandIn> take_if(Match match);

    std::vector<PendingStandIn> pending_;  // in arrival order; a handful at most per asker
};

}  // namespace comfy::arbiter
