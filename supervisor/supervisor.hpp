#pragma once
// The supervisor: one Boost.Asio event loop that owns the segment, spawns one worker per
// pack, watches each through its pidfd and heartbeat, restarts the dead with backoff,
// routes requests to workers and answers every one of them, and shuts down cleanly.

#include "ipc/eventfd.hpp"
#include "shared/segment_layout.hpp"
#include "supervisor/admission_waits.hpp"
#include "supervisor/arbiter/arbiter.hpp"
#include "supervisor/arbiter/trace.hpp"
#include "supervisor/bridge_broker.hpp"
#include "supervisor/census_reader.hpp"
#include "supervisor/config.hpp"
#include "supervisor/event_journal.hpp"
#include "supervisor/host_memory.hpp"
#include "supervisor/log.hpp"
#include "supervisor/log_limiter.hpp"
#include "supervisor/ops_http.hpp"
#include "supervisor/release_totals.hpp"
#include "supervisor/segment_writer.hpp"
#include "supervisor/worker_process.hpp"
#include "worker/device.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <functional>
#include <map>
#include <memory>
#include <vector>

namespace comfy::supervisor {

class HistorySampler;

// The configured device cannot be used and the config says to stop (exit status 2).
class DeviceUnavailable : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class Supervisor {
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
    void record_to(const std::string& path);

    // Called once every worker reached ready for the first time (or failed).
    void on_all_started(std::function<void()> callback) { all_started_ = std::move(callback); }

    // Lifecycle moments, as the loop sees them; for measurement (scripts/bench lifecycle).
    enum class WorkerEvent { spawned, ready, exited };
    using Observer = std::function<void(WorkerEvent, const WorkerProcess&)>;
    void observe(Observer observer) { observer_ = std::move(observer); }
    // Every event the arbiter handles, with what it decided (scripts/bench arbitration).
    using ArbitrationObserver = std::function<void(const arbiter::Event&, const std::vector<arbiter::Action>&)>;
    void observe_arbitration(ArbitrationObserver observer) { arbitration_observer_ = std::move(observer); }

    struct Totals {
        std::uint32_t workers_started = 0;
        std::uint32_t workers_restarted = 0;
        std::uint64_t peak_device_used = 0;
        std::uint32_t admissions = 0;
        std::uint32_t evictions_asked = 0;     // partial unloads and detaches sent to owners
        std::uint64_t bytes_evicted = 0;       // measured, from the owners' receipts
        std::uint32_t granted = 0;             // shortfall or not
        std::uint32_t admitted_short = 0;      // granted with a shortfall (policy admit)
        std::uint32_t refused = 0;
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
    const AdmissionWaits::Histogram& admission_waits() const noexcept { return admission_waits_.histogram(); }

private:
    // Journals an admission's answer with what it asked and how long it waited.
    void record_answer(const WorkerProcess& asker, std::uint64_t correlation, const char* answer, Bytes device_free,
                       Bytes shortfall);
    // Logs `text` (after the pack's name) and records it in the journal as `kind`.
    void happened(LogLevel level, const WorkerProcess& worker, const char* kind, const std::string& text,
                  nlohmann::json figures = nlohmann::json::object());

    void start_worker(WorkerProcess& worker);
    void watch_exit(WorkerProcess& worker);
    void on_exit(WorkerProcess& worker);
    void terminate(WorkerProcess& worker, const std::string& reason);
    void schedule_restart(WorkerProcess& worker);
    void fail_requests(WorkerProcess& worker, FailureReason reason, bool include_queued);

    void wait_for_messages();
    void drain_rings();
    void handle_message(WorkerProcess& worker, const MessageSlot& slot);
    void accept_hello(WorkerProcess& worker, const Message& message);
    void deliver(WorkerProcess& worker, const MessageSlot& message);
    void flush(WorkerProcess& worker);
    void dispatch_queued(WorkerProcess& worker);

    // Memory arbitration: feeds the arbiter an event with a fresh snapshot, carries out
    // what it decides, and publishes the ledger's changes to the segment.
    void arbitrate(const arbiter::Event& event);
    // Milliseconds since the supervisor started: the arbiter's clock.
    std::uint64_t now_ms() const;
    // Who an event's notes are about, when it is a participant's message: its notes are
    // logged through the limiter under `topic`.
    struct NoteSource {
        arbiter::Participant who;
        const char* topic;
    };
    static std::optional<NoteSource> note_source(const arbiter::Event& event);
    void carry_out(const arbiter::Action& action, const std::optional<NoteSource>& source);
    // Logs a line `worker` can make the supervisor write again and again: at most a few per
    // topic and window, then one line that says how many more were left out.
    void log_about(const WorkerProcess& worker, const std::string& topic, std::string line);
    // Whether `worker`, which just sent a message of type `sent`, may have one more request
    // waiting on us; if not, it is stopped.
    bool may_ask(WorkerProcess& worker, MessageType sent);
    void publish_ledger();
    WorkerProcess* worker_in(std::uint32_t slot, std::uint32_t generation);
    void handle_memory_report(WorkerProcess& worker, const Message& message);
    void on_release_receipt(WorkerProcess& worker, const ReleaseReceipt& receipt);
    // Logs a load that fits only because its worker's boundary releases ran before it.
    void note_fit_by_release(const WorkerProcess& worker, const AdmissionRequest& request);

    // Release paths beyond eviction: epoch and node boundaries, the idle sweep, the
    // operator's full release, and host RAM pressure (release_pins in proportion).
    void on_node_started(WorkerProcess& worker, const NodeStarted& node);
    void on_node_finished(WorkerProcess& worker, const NodeFinished& node);
    // Sends cast_epoch_boundary to every worker when `epoch` is a new prompt.
    void start_epoch(std::uint64_t epoch);
    void answer_pin_request(WorkerProcess& worker, const Message& message);
    void sweep_idle_workers();
    // Asks pin holders to release, in proportion, how far available host memory is below
    // low water; at most one round per interval.
    void relieve_host_pressure();
    // The same for `deficit`, with the holdings and available figure the caller just read.
    void relieve_host_pressure(Bytes deficit, const std::vector<HostHolding>& holdings, Bytes available);
    // Whether a round of release_pins went out less than an interval before `now`.
    bool pin_release_recent(std::chrono::steady_clock::time_point now) const;
    std::vector<HostHolding> host_holdings();
    Bytes host_available(const std::vector<HostHolding>& holdings) const;
    void release_everything(FullReleaseReason reason);
    void retry_failed_packs();
    void watch_signals();

    // The operator's HTTP endpoints: what they answer.
    void start_http();
    // POST /free: detaches every model in the ledger, and with free_memory releases everything.
    void answer_free(const FreeRequest& request);
    std::string census_json() const;
    std::string metrics_text();

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
    std::function<void()> all_started_;
    Observer observer_;
    ArbitrationObserver arbitration_observer_;
    bool shutting_down_ = false;
    std::uint64_t next_correlation_ = 1;
    arbiter::Arbiter arbiter_;
    std::optional<arbiter::TraceRecorder> recorder_;
    std::optional<OpsHttpServer> http_;
    std::unique_ptr<HistorySampler> history_;  // GET /history; sampled while HTTP is on
    std::uint32_t ledger_quota_;  // rows one participant may hold in the ledger
    LogLimiter log_limiter_;
    EventJournal journal_;
    AdmissionWaits admission_waits_;
    Totals memory_totals_;
    ReleaseTotals releases_;
    std::chrono::steady_clock::time_point started_at_ = std::chrono::steady_clock::now();
    std::uint64_t prompt_epoch_ = 0;
    std::chrono::steady_clock::time_point last_pin_release_{};
};

}  // namespace comfy::supervisor
