#pragma once
// The supervisor: one Boost.Asio event loop that owns the segment, spawns one worker per
// pack, watches each through its pidfd and heartbeat, restarts the dead with backoff,
// routes requests to workers and answers every one of them, and shuts down cleanly.

#include "shared/segment_layout.hpp"
#include "supervisor/bridge/bridge_broker.hpp"
#include "supervisor/config/config.hpp"
#include "supervisor/lifecycle/message_pump.hpp"
#include "supervisor/lifecycle/stray_watch.hpp"
#include "supervisor/lifecycle/warm_templates.hpp"
#include "supervisor/lifecycle/worker_access.hpp"
#include "supervisor/lifecycle/worker_process.hpp"
#include "supervisor/memory/census_reader.hpp"
#include "supervisor/memory/host_memory.hpp"
#include "supervisor/memory/memory_broker.hpp"
#include "supervisor/memory/release_scheduler.hpp"
#include "supervisor/memory/segment_writer.hpp"
#include "supervisor/memory/simulated_device_use.hpp"
#include "supervisor/memory/supervised_device.hpp"
#include "supervisor/ops/control_server.hpp"
#include "supervisor/ops/log/event_journal.hpp"
#include "supervisor/ops/log/log.hpp"
#include "supervisor/ops/log/log_limiter.hpp"
#include "supervisor/ops/operator_actions.hpp"
#include "supervisor/ops/ops_endpoints.hpp"
#include "supervisor/ops/refusals.hpp"
#include "supervisor/ops/supervised.hpp"
#include "worker/device.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <functional>
#include <map>
#include <unordered_map>
#include <memory>
#include <vector>

namespace comfy::supervisor {


class Supervisor : public Supervised, private WorkerAccess {
public:
    // Opens the device and creates the segment (removing a stale one of the same
    // instance). Throws DeviceUnavailable or DeviceNotReady when a CUDA device is
    // configured, unusable, and the config says stop; ipc::InstanceTaken when the instance
    // is a live supervisor's; ipc::SegmentError when the segment cannot be made.
    Supervisor(Config config, const std::string& instance);
    ~Supervisor();

    boost::asio::io_context& io() noexcept override { return io_; }
    const SegmentView& view() const noexcept { return view_; }

    // Starts every worker and runs the loop until shutdown completes. Returns the exit code.
    int run();

    // Supervised: the loop, work for the packs, shutdown, the figures.
    void submit(const std::string& pack, const std::string& node, std::uint64_t epoch, std::uint32_t index,
                ReplyHandler reply) override;
    void begin_shutdown(const std::string& why) override;
    bool shutting_down() const noexcept override { return shutting_down_; }
    Readiness readiness() const override { return readiness_of(workers_, shutting_down_); }
    void on_all_started(std::function<void()> callback) override { all_started_.push_back(std::move(callback)); }
    void on_shutdown(std::function<void()> callback) override { shutdown_begun_.push_back(std::move(callback)); }
    Totals totals() const override;
    std::vector<CensusRow> census_rows() const override;

    // Writes every event the arbiter sees, with its snapshot and decisions, to `path`
    // (JSON lines, docs/TRACE.md), for `comfy-supervisor replay`. Throws on an unwritable file.
    void record_to(const std::string& path) { memory_.record_to(path); }

    // Lifecycle moments, as the loop sees them; for measurement (scripts/bench lifecycle).
    enum class WorkerEvent { spawned, ready, exited };
    using Observer = std::function<void(WorkerEvent, const WorkerProcess&)>;
    void observe(Observer observer) { observer_ = std::move(observer); }
    // Every event the arbiter handles, with what it decided (scripts/bench arbitration).
    void observe_arbitration(MemoryBroker::Observer observer) { memory_.observe(std::move(observer)); }

private:
    // WorkerAccess, for the memory broker, the release paths and the operator's actions.
    const std::vector<std::unique_ptr<WorkerProcess>>& workers() override { return workers_; }
    WorkerProcess* live(std::uint32_t slot, std::uint32_t generation) override;
    void deliver(WorkerProcess& worker, const MessageSlot& message) override;
    void terminate(WorkerProcess& worker, const std::string& reason) override;
    void log_about(const WorkerProcess& worker, const std::string& topic, std::string line,
                   LogFields about = {}) override;
    void happened(LogLevel level, const WorkerProcess& worker, const char* kind, const std::string& text,
                  nlohmann::json figures = nlohmann::json::object()) override;
    void start_worker(WorkerProcess& worker) override;
    void keep_stopped(WorkerProcess& worker) override;

    void watch_exit(WorkerProcess& worker);
    void on_exit(WorkerProcess& worker);
    // Another life follows the one of `worker` that ended at `now` (what on_exit goes on to
    // decide), known before the host is told of the exit.
    bool restarts_after_exit(const WorkerProcess& worker, std::chrono::steady_clock::time_point now) const;
    void schedule_restart(WorkerProcess& worker,
                          std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());
    // Marks it failed until an operator asks again, saying why (WorkerProcess::why_given_up)
    // in its record, the journal and the host's answer to whoever waits on it.
    void give_up(WorkerProcess& worker);

    void handle_message(WorkerProcess& worker, const MessageSlot& slot);
    // The simulated device's allocations and releases, which the supervisor decides.
    void on_device_use(WorkerProcess& worker, const Message& message);
    void accept_hello(WorkerProcess& worker, const Message& message);
    // Its Hello, or the `ready` after it, made it ready: work goes to it from now on.
    void become_ready(WorkerProcess& worker);
    void flush(WorkerProcess& worker);
    void dispatch_queued(WorkerProcess& worker);
    // A node's start and end: the worker's state, the arbiter's busy flag, and the
    // release paths' boundaries.
    // `correlation`: its message's, which names the work request it runs when it is one of ours.
    void on_node_started(WorkerProcess& worker, const NodeStarted& node, std::uint64_t correlation);
    void on_node_finished(WorkerProcess& worker, const NodeFinished& node);

    // The control socket: started with the workers, stopped at shutdown.
    void start_control();
    void watch_signals();

    void check_heartbeats();
    // Publishes the segment's copy again when another process damaged it (truncated it,
    // took its name), saying so in the log.
    void keep_published();
    // Republishes, for comfyctl, the censuses that changed since the last call.
    void publish_census_reports();
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
    // What the HTTP endpoints and the control socket turned away; before io_, so it
    // outlives every handler they leave on the loop.
    Refusals refusals_;
    boost::asio::io_context io_;
    ipc::SharedSegment segment_;
    SegmentView view_;
    SegmentView published_view_;  // the segment's published copy, for readers by name
    SegmentWriter writes_;  // every write into the segment (and its copy) goes through it
    // The simulated device's account, which decides every allocation on it; empty for a
    // real device.
    std::optional<SimulatedDeviceUse> device_use_;
    CensusReader census_;  // every census read for decisions goes through it
    MessagePump pump_;  // the participants' messages, in turns
    boost::asio::signal_set signals_;
    boost::asio::signal_set operator_signals_;  // SIGUSR1: full release; SIGHUP: retry failed packs
    WarmTemplates templates_;  // the processes Python pack workers are forked from
    StrayWatch strays_;  // the subreaper's: what ended lives left behind
    boost::asio::steady_timer heartbeat_timer_;
    boost::asio::steady_timer shutdown_timer_;
    std::vector<std::unique_ptr<WorkerProcess>> workers_;  // workers_[i] runs in slot first_slot_ + i
    std::unordered_map<std::string, WorkerProcess*> packs_by_name_;  // the packs' workers (not the host)
    HostRequests host_requests_;  // the host's asks to end a pack's life (a Cancel outrun, a broken session)
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
    OperatorActions operator_;    // comfyctl's actions, through the control socket
    std::optional<ControlServer> control_;  // last: destroyed before the journal it reads
};

}  // namespace comfy::supervisor
