#pragma once
// Which participants a new prompt's cast_epoch_boundary concerns, so that a prompt costs
// the supervisor (and the machine) in proportion to the participants that worked, not to
// all of them: with a thousand idle workers, sending it to every one cost the supervisor
// 16 ms of CPU and woke each of them.
//
// What the boundary frees is what nodes left behind (upstream's reset_cast_buffers: cast
// buffers and patch pins, docs/ARBITRATION.md, "Releases"), and a worker leaves something
// only by running a node. So it concerns a participant that ran a node since it was last
// sent one: one the supervisor heard node_started from in this life. A worker running
// nodes when the boundary goes out (busy) stays concerned, since those nodes may belong
// to the new prompt; so does an idle one for one boundary more, since a pack's worker
// announces a run of nodes once (node_started at its first), and a run can reach into the
// new prompt before the supervisor has read both ends of it. A worker that ran nothing
// since holds nothing a boundary frees: it freed it at the boundary before, or its life
// began after. A new life starts with nothing, so a listing of an earlier life is dropped.

#include "supervisor/lifecycle/worker_access.hpp"

#include <cstdint>
#include <map>

namespace comfy::supervisor {

class EpochBoundaries {
public:
    explicit EpochBoundaries(WorkerAccess& workers) : workers_(workers) {}

    // `worker` started a node (or a run of them): the next boundary concerns it.
    void node_started(const WorkerProcess& worker);
    // Sends cast_epoch_boundary for `epoch` to every participant it concerns, when `epoch`
    // is a new prompt (later than any seen); an older or repeated one changes nothing.
    void start_epoch(std::uint64_t epoch);

    std::uint64_t epoch() const noexcept { return epoch_; }
    // How many participants the next boundary would reach at most (for the tests).
    std::size_t concerned() const noexcept { return concerned_.size(); }

private:
    struct Concerned {
        std::uint32_t generation;  // the life that ran the node
        std::uint32_t idle_boundaries;  // boundaries sent to it while it was idle since then
    };

    WorkerAccess& workers_;
    std::uint64_t epoch_ = 0;
    std::map<std::uint32_t, Concerned> concerned_;  // by slot
};

}  // namespace comfy::supervisor
