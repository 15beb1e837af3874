#pragma once
// The supervisor: one Boost.Asio event loop that owns the segment, spawns one worker per
// pack, watches each through its pidfd and heartbeat, restarts the dead with backoff,
// routes requests to workers and answers every one of them, and shuts down cleanly.

#include "ipc/eventfd.hpp"
#include "shared/segment_layout.hpp"
#include "supervisor/bridge/bridge_broker.hpp"
#include "supervisor/memory/census_reader.hpp"
#include "supervisor/config/config.hpp"
#include "supervisor/ops/control_server.hpp"
#include "supervisor/ops/log/event_journal.hpp"
#include "supervisor/memory/host_memory.hpp"
#include "supervisor/ops/log/log.hpp"
#include "supervisor/ops/log/log_limiter.hpp"
#include "supervisor/ops/ops_endpoints.hpp"
#include "supervisor/memory/memory_broker.hpp"
#include "supervisor/memory/release_scheduler.hpp"
#include "supervisor/memory/segment_writer.hpp"
#include "supervisor/lifecycle/worker_access.hpp"
#include "supervisor/lifecycle/worker_process.hpp"
#include "worker/device.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <functional>
#include <map>
#include <memory>
#include <vector>

namespace comfy::supervisor {


// The configured device cannot be used and the config says to stop (exit status 2).
class DeviceUnavailable : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class Supervisor : private WorkerAccess {
public:
    // Opens the device and creates the segment (removing a stale one of the same
    // instance). Throws DeviceUnavailable when a CUDA device is configured, unusable, and
    // the config says stop; ipc::SegmentError when the instance is taken by a live supervisor.
    Supervisor(Config config, const std::string& instance);
    ~Supervisor();

    boost::asio::io_context& io() noexcept { return io_; }
    const SegmentView& view() const noexcept { return view_; }

    // Starts every worker and runs the loop until shutdown completes. Returns the exit code.
    int run();

    // Sends `node` of prompt `epoch` to `pack`'s worker (queued until it is ready) and
    // calls `reply` exactly once with the WorkResult or a RequestFailed.
    void submit(const std::string& pack, const std::string& node, std::uint64_t epoch, std::uint32_t index,
                ReplyHandler reply);

    // Stops accepting work, asks every worker to finish, kills what remains after the
    // grace period, and ends run() once every child is reaped.
    void begin_shutdown(const std::string& why);
    bool shutting_down() const noexcept { return shutting_down_; }

    // Writes every event the arbiter sees, with its snapshot and decisions, to `path`
    // (JSON lines, docs/TRACE.md), for `comfy-supervisor replay`. Throws on an unwritable file.
    void record_to(const std::string& path) { memory_.record_to(path); }

    // Called once every worker reached ready for the first time (or failed); each callback
    // once, in the order given.
    void on_all_started(std::function<void()> callback) { all_started_.push_back(std::move(callback)); }
    // Called when shutdown begins, before any worker is asked to finish.
    void on_shutdown(std::function<void()> callback) { shutdown_begun_.push_back(std::move(callback)); }

    // Lifecycle moments, as the loop sees them; for measurement (scripts/bench lifecycle).
    enum class WorkerEvent { spawned, ready, exited };
    using Observer = std::function<void(WorkerEvent, const WorkerProcess&)>;
    void observe(Observer observer) { observer_ = std::move(observer); }
    // Every event the arbiter handles, with what it decided (scripts/bench arbitration).
    void observe_arbitration(MemoryBroker::Observer observer) { memory_.observe(std::move(observer)); }

    struct Totals : MemoryTotals {
        std::uint32_t workers_started = 0;
        std::uint32_t workers_restarted = 0;
        std::uint64_t withdrawn = 0;           // dropped unanswered: the asker left first
        std::uint64_t unanswered = 0;          // still being worked or waiting
        std::uint32_t pin_release_rounds = 0;
        ReleaseCounts released{};              // measured, from release receipts, by kind
    };
    Totals totals() const;

    // What each worker holds now, read from its census slot.
    struct CensusRow {
        std::string pack;
        std::int32_t pid;
        std::uint32_t generation;
        std::uint32_t restarts;
        CensusRecord census;
    };
    std::vector<CensusRow> census_rows() const;

    // What happened, for comfyctl events and the dashboard.
    EventJournal& journal() noexcept { return journal_; }
    // How long admissions waited for their answers.
    const AdmissionWaits::Histogram& admission_waits() const noexcept { return memory_.admission_waits(); }

    // Operator actions on one pack, named as in the config ("host" for ComfyUI), from the
    // control socket (supervisor_actions.cpp). Each answers at once, in one line.
    // restart: stops the worker and starts it again at once, not counted as a crash.
    ActionAnswer restart_pack(const std::string& name);
    // stop: stops it and keeps it in state stopped; its requests fail at once.
    ActionAnswer stop_pack(const std::string& name);
    // start: starts a stopped or failed pack, its restarts forgotten.
    ActionAnswer start_pack(const std::string& name);
    // release: a full release, or with `pins` a release_pins of that many bytes.
    ActionAnswer release_pack(const std::string& name, std::optional<Bytes> pins);

private:
    // WorkerAccess, for the memory broker and the release paths.
    const std::vector<std::unique_ptr<WorkerProcess>>& workers() override { return workers_; }
    WorkerProcess* live(std::uint32_t slot, std::uint32_t generation) override;
    void deliver(WorkerProcess& worker, const MessageSlot& message) override;
    void terminate(WorkerProcess& worker, const std::string& reason) override;
    void log_about(const WorkerProcess& worker, const std::string& topic, std::string line) override;

    // Logs `text` (after the pack's name) and records it in the journal as `kind`.
    void happened(LogLevel level, const WorkerProcess& worker, const char* kind, const std::string& text,
                  nlohmann::json figures = nlohmann::json::object());

    void start_worker(WorkerProcess& worker);
    void watch_exit(WorkerProcess& worker);
    void on_exit(WorkerProcess& worker);
    void schedule_restart(WorkerProcess& worker);
    void fail_requests(WorkerProcess& worker, FailureReason reason, bool include_queued);

    void wait_for_messages();
    void drain_rings();
    void handle_message(WorkerProcess& worker, const MessageSlot& slot);
    void accept_hello(WorkerProcess& worker, const Message& message);
    void flush(WorkerProcess& worker);
    void dispatch_queued(WorkerProcess& worker);
    // A node's start and end: the worker's state, the arbiter's busy flag, and the
    // release paths' boundaries.
    void on_node_started(WorkerProcess& worker, const NodeStarted& node);
    void on_node_finished(WorkerProcess& worker, const NodeFinished& node);

    void retry_failed_packs();

    // The control socket (supervisor_actions.cpp): started with the workers, stopped at shutdown.
    void start_control();
    WorkerProcess* pack_named(const std::string& name);
    ActionAnswer unknown_pack(const std::string& name) const;
    // Called when a life ended that an operator stopped or restarted: keeps it stopped or
    // starts it again at once; false when no operator asked.
    bool after_operator_exit(WorkerProcess& worker);
    void settle_stopped(WorkerProcess& worker);
    void watch_signals();

    void check_heartbeats();
    // Republishes, for comfyctl, the censuses that changed since the last call.
    void publish_census_reports();
    // Stops `worker` when its census or its ring holds what its writer cannot have meant.
    void check_shared_memory(WorkerProcess& worker);
    void publish(const WorkerProcess& worker);
    void set_state(WorkerProcess& worker, ParticipantState state);
    void finish_if_done();
    void check_all_started();
    void notify(WorkerEvent event, const WorkerProcess& worker) const {
        if (observer_) observer_(event, worker);
    }

    Config config_;
    std::string instance_;
    // The CUDA device the workers share, when one is configured and usable; the
    // supervisor reads its free memory from it. Null for the simulated device.
    std::unique_ptr<worker::Device> cuda_;
    boost::asio::io_context io_;
    ipc::SharedSegment segment_;
    SegmentView view_;
    SegmentWriter writes_;  // every write into the segment goes through it
    // The simulated device's table (read-only here), handed to every participant; empty
    // for a real device.
    std::optional<ipc::SealedRegion> device_table_region_;
    std::optional<DeviceTable> device_table_;
    CensusReader census_;  // every census read for decisions goes through it
    ipc::EventFd doorbell_;
    boost::asio::posix::stream_descriptor doorbell_watch_;
    boost::asio::signal_set signals_;
    boost::asio::signal_set operator_signals_;  // SIGUSR1: full release; SIGHUP: retry failed packs
    boost::asio::steady_timer heartbeat_timer_;
    boost::asio::steady_timer shutdown_timer_;
    std::vector<std::unique_ptr<WorkerProcess>> workers_;  // workers_[i] runs in slot first_slot_ + i
    BridgeBroker bridge_;  // node calls between the host and the Python packs: descriptors only
    std::uint32_t first_slot_ = 0;
    std::vector<std::function<void()>> all_started_;
    std::vector<std::function<void()>> shutdown_begun_;
    Observer observer_;
    bool shutting_down_ = false;
    std::uint64_t next_correlation_ = 1;
    LogLimiter log_limiter_;
    EventJournal journal_;
    MemoryBroker memory_;         // every memory message, the arbiter and the ledger
    ReleaseScheduler releases_;   // boundaries, sweeps, the operator's release, host RAM
    OpsEndpoints ops_;            // the HTTP endpoints, the dashboard and the history
    std::optional<ControlServer> control_;  // last: destroyed before the journal it reads
};

}  // namespace comfy::supervisor
