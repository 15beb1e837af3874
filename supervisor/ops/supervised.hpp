#pragma once
// Room ops/: the operator's surface. HTTP with the dashboard and metrics, the control socket
// and the operator's actions, systemd's notifications, the workload runner and its summary.
//
// What the operator's side (ops/) needs of the running supervisor: its loop, its start
// and its end, a node submitted to a pack (the workload runner), and the figures its
// endpoints and summary print. The Supervisor implements it, so nothing in ops/ includes
// supervisor.hpp: every room stays below the class that wires them.

#include "shared/records.hpp"
#include "supervisor/lifecycle/worker_process.hpp"
#include "supervisor/memory/census_reader.hpp"
#include "supervisor/memory/memory_broker.hpp"
#include "supervisor/memory/release_scheduler.hpp"
#include "supervisor/memory/release_totals.hpp"
#include "supervisor/ops/health.hpp"

#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace comfy::supervisor {

// What the supervisor has done since it started.
struct Totals : MemoryTotals {
    std::uint32_t workers_started = 0;
    std::uint32_t workers_restarted = 0;
    std::uint64_t withdrawn = 0;           // dropped unanswered: the asker left first
    std::uint64_t unanswered = 0;          // still being worked or waiting
    std::uint64_t passed_over = 0;         // evictions not asked: their owner was deaf
    std::uint32_t pin_release_rounds = 0;
    ReleaseCounts released{};              // measured, from release receipts, by kind
    RefusedReceipts receipts_refused{};    // receipts not counted, or not counted whole
};

// What one worker holds now, read from its census slot.
struct CensusRow {
    std::string pack;
    std::int32_t pid;
    std::uint32_t generation;
    std::uint32_t restarts;
    CensusRecord census;
};

// The totals of what `memory` and `releases` did and `workers` went through.
Totals totals_of(const MemoryBroker& memory, const ReleaseScheduler& releases,
                 const std::vector<std::unique_ptr<WorkerProcess>>& workers);
// What each of `workers` holds now, as `census` last read it.
std::vector<CensusRow> census_rows_of(const std::vector<std::unique_ptr<WorkerProcess>>& workers,
                                      const CensusReader& census);

class Supervised {
public:
    virtual boost::asio::io_context& io() noexcept = 0;
    // Called once every worker reached ready for the first time (or failed); each callback
    // once, in the order given.
    virtual void on_all_started(std::function<void()> callback) = 0;
    // Called when shutdown begins, before any worker is asked to finish.
    virtual void on_shutdown(std::function<void()> callback) = 0;
    // Sends `node` of prompt `epoch` to `pack`'s worker (queued until it is ready) and
    // calls `reply` exactly once with the WorkResult or a RequestFailed.
    virtual void submit(const std::string& pack, const std::string& node, std::uint64_t epoch, std::uint32_t index,
                        ReplyHandler reply) = 0;
    // Stops accepting work, asks every worker to finish, kills what remains after the
    // grace period, and ends the loop once every child is reaped.
    virtual void begin_shutdown(const std::string& why) = 0;
    virtual bool shutting_down() const noexcept = 0;
    // Who is up and who keeps it from being ready (supervisor/ops/health.hpp).
    virtual Readiness readiness() const = 0;
    virtual Totals totals() const = 0;
    virtual std::vector<CensusRow> census_rows() const = 0;

protected:
    ~Supervised() = default;
};

}  // namespace comfy::supervisor
