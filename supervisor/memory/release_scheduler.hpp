#pragma once
// The release paths beyond eviction: a prompt's cast_epoch_boundary to the workers it
// concerns (epoch_boundaries.hpp), a
// node's release_node_boundary, the idle sweep's full release, the operator's full
// release, and host RAM: pin requests answered against the budget, and release_pins
// asked of the pin holders in proportion when available memory falls below low water.

#include "supervisor/config/config.hpp"
#include "supervisor/lifecycle/worker_access.hpp"
#include "supervisor/memory/census_reader.hpp"
#include "supervisor/memory/epoch_boundaries.hpp"
#include "supervisor/memory/host_memory.hpp"
#include "supervisor/memory/memory_broker.hpp"
#include "supervisor/ops/log/event_journal.hpp"

#include <chrono>
#include <cstdint>
#include <vector>

namespace comfy::supervisor {

class ReleaseScheduler {
public:
    ReleaseScheduler(const HostMemoryConfig& host, WorkerAccess& workers, CensusReader& census, MemoryBroker& memory,
                     EventJournal& journal);

    // Sends cast_epoch_boundary to the workers it concerns when `epoch` is a new prompt.
    void start_epoch(std::uint64_t epoch) { epochs_.start_epoch(epoch); }
    // `worker` started a node of prompt `epoch` (the host's own prompts are seen here first).
    void node_started(const WorkerProcess& worker, std::uint64_t epoch);
    // `worker` finished a node: it is idle from now, and gets its node boundary release
    // when it declared it wants them.
    void node_finished(WorkerProcess& worker, const NodeFinished& node);
    // A pin request, granted as far as the host budget allows; a cut one makes room for
    // the next try.
    void answer_pin_request(WorkerProcess& worker, const Message& message);
    // The loop's tick: the idle sweep and the host pressure check.
    void tick();
    // Every live worker releases everything (idle ones at once, busy ones at their next
    // boundary).
    void release_everything(FullReleaseReason reason);

    std::uint32_t pin_release_rounds() const noexcept { return pin_release_rounds_; }
    HostFigures host_figures();

private:
    using Clock = std::chrono::steady_clock;
    void sweep_idle_workers();
    // Asks pin holders to release, in proportion, how far available host memory is below
    // low water; at most one round per interval.
    void relieve_host_pressure();
    // The same for `deficit`, with the holdings and available figure the caller just read.
    void relieve_host_pressure(Bytes deficit, const std::vector<HostHolding>& holdings, Bytes available);
    // Whether a round of release_pins went out less than an interval before `now`.
    bool pin_release_recent(Clock::time_point now) const;
    std::vector<HostHolding> host_holdings();
    Bytes host_available(const std::vector<HostHolding>& holdings) const;

    const HostMemoryConfig& host_;
    WorkerAccess& workers_;
    CensusReader& census_;
    MemoryBroker& memory_;
    EventJournal& journal_;
    EpochBoundaries epochs_;
    Clock::time_point last_pin_release_{};
    std::uint32_t pin_release_rounds_ = 0;
};

}  // namespace comfy::supervisor
