#pragma once
// Room lifecycle/: who lives. Spawning each participant (sandboxed where configured), its
// handshake, liveness and messages, its death and restart, and this view of it, which the
// other rooms reach through WorkerAccess (worker_access.hpp).
//
// The supervisor's private view of one participant process (a pack's worker, or the
// ComfyUI host): what it started, what it waits for, and what it owes to whoever sent
// the worker requests.

#include "ipc/sealed_region.hpp"
#include "shared/message_codec.hpp"
#include "shared/participant_region.hpp"
#include "supervisor/config/config.hpp"
#include "supervisor/lifecycle/answers_due.hpp"
#include "supervisor/lifecycle/child_output.hpp"
#include "supervisor/lifecycle/keep_list.hpp"
#include "supervisor/lifecycle/outbox.hpp"
#include "supervisor/lifecycle/process_spawner.hpp"
#include "supervisor/lifecycle/restart_policy.hpp"
#include "supervisor/lifecycle/turn_list.hpp"
#include "worker/worker_environment.hpp"

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace comfy::supervisor {

// Answers a request: with the worker's reply, or a RequestFailed from the supervisor.
using ReplyHandler = std::function<void(const Message& reply)>;

struct PendingRequest {
    MessageSlot message;  // correlation set; generation stamped when sent
    ReplyHandler reply;
    std::string node;     // the node it asks for, by name
};

// A request sent and not answered yet: who waits for its answer, and what it asked for.
struct SentRequest {
    ReplyHandler reply;
    std::string node;
};

// What an operator asked for a participant's life that is ending (ops/operator_actions.cpp):
// nothing, to keep it stopped, or to start it again at once; or, for a pack's worker, that
// ComfyUI's Cancel ended it (its node outran the grace period; bridge/host_requests.hpp),
// to start again at once too.
enum class OperatorIntent { none, stop, restart, cancelled };

struct WorkerProcess {
    // `keep_limit`: the most models one admission may keep (the ledger's capacity).
    WorkerProcess(const PackConfig& config, std::uint32_t slot_index, ParticipantKind participant_kind,
                  boost::asio::io_context& io, std::size_t keep_limit)
        : pack(config), slot(slot_index), kind(participant_kind), restarts(config.restart), pidfd(io),
          restart_timer(io), handshake_timer(io), kill_timer(io), pump(io), keeping(keep_limit), answers_due(keep_limit) {}

    PackConfig pack;  // for the host: its "comfyui" section, named kHostParticipantName
    std::uint32_t slot;
    ParticipantKind kind;
    std::uint32_t generation = 0;
    ParticipantState state = ParticipantState::empty;
    RestartTracker restarts;
    worker::Token token{};
    SpawnedProcess process;
    boost::asio::posix::stream_descriptor pidfd;
    std::shared_ptr<ChildOutput> output;  // this life's stdout and stderr; reads on until its end of file
    boost::asio::steady_timer restart_timer;
    boost::asio::steady_timer handshake_timer;
    boost::asio::steady_timer kill_timer;
    // The running life's own region (mapped read-only here; empty while none runs) and
    // the rings whose halves are joined from it and the segment.
    ipc::SealedRegion region;
    ParticipantRegionView region_view;
    std::optional<ipc::RingProducer<MessageSlot>> to_worker;
    std::optional<ipc::RingConsumer<MessageSlot>> from_worker;
    PumpState pump;  // its doorbell, and whether it waits for a turn (message_pump.hpp)
    std::uint32_t census_problems = 0;  // heartbeat checks in a row that found its census unreadable

    std::uint64_t last_heartbeat = 0;
    std::chrono::steady_clock::time_point heartbeat_seen_at{};
    std::string kill_reason;  // why the supervisor is ending this worker, if it is
    OperatorIntent operator_intent = OperatorIntent::none;  // for when this life has exited
    std::int32_t last_exit_status = -1;
    std::int32_t last_exit_signal = 0;
    // Why this pack cannot start, found before its spawn or in its exec (start_failures.hpp):
    // a failure no restart cures, so it is failed at once. Empty when its command ran.
    std::string cannot_start;
    // In its record (ParticipantRecord::note): why it failed, or a warning while it runs.
    std::string note;
    std::uint32_t node_classes = kNodeClassesUncounted;  // as this life's `ready` said
    std::uint64_t started_at_ms = 0;
    std::uint32_t starts = 0;
    std::uint64_t capabilities = 0;  // from its Hello
    // This life's Hello was accepted; with kCapReadyLater it is spawning until its `ready`.
    bool joined = false;
    std::chrono::steady_clock::time_point idle_since{};
    bool idle_released = false;  // the idle sweep already asked it for a full release
    // The arbiter passes it over until it answers (set by the memory broker): shown in its
    // record, so that comfyctl and the metrics say so. A life that ends is no longer deaf.
    bool deaf = false;
    KeepList keeping;  // the keep_loaded list of the admission it is sending

    Outbox outbox;                                   // waiting for room in the ring
    AnswersDue answers_due;                          // in the ring, not answered yet
    std::deque<PendingRequest> queued;               // waiting for a ready worker
    std::map<std::uint64_t, SentRequest> in_flight;   // sent, by correlation id
    // The node it started last, when it is one we sent it (in its record, for comfyctl top).
    std::string last_node;
    // While busy (in its record, for comfyctl): since when, wall clock ms, and whether it
    // serves the host's use of its objects (a callback) rather than a node of its own.
    std::uint64_t busy_since_ms = 0;
    bool in_callback = false;

    bool alive() const noexcept { return process.pid > 0; }
    // Ready or busy: past its Hello and taking messages (not draining, dead or failed).
    bool up() const noexcept { return state == ParticipantState::ready || state == ParticipantState::busy; }
    // Past its Hello, its start-up not done (kCapReadyLater): spawning, its memory messages
    // taken and its heartbeat watched, but no work sent it and no release asked of it.
    bool starting() const noexcept { return joined && state == ParticipantState::spawning; }

    // A fresh region for a new life, nothing the previous one wrote surviving into it, and
    // the rings joined from it and `segment` (the supervisor's halves emptied: the previous
    // process is reaped, so nobody reads them now); nothing queued for an earlier life.
    // Throws when the region cannot be made.
    void open_region(const SegmentView& segment);
    // The life ended: its rings and region go.
    void close_region();

    // Its process has exited, and its pidfd's handler has yet to reap it.
    bool exited() const;
    // Reaps this life's exited process, kills what it left in its group, and records how it
    // ended; returns that in words ("killed by SIGKILL (hung: ...)").
    std::string reap();
    // Its last life cannot be followed by another that fares better: it could not start
    // (cannot_start), or it exited with kExitCannotRun.
    bool cannot_run() const noexcept { return !cannot_start.empty() || last_exit_status == kExitCannotRun; }
    // Why it is not restarted again: it cannot start, or cannot run as configured (it exited
    // with kExitCannotRun), or it restarted too often; with the last line its life wrote.
    std::string why_given_up() const;
    // Its row of the participant table, as comfyctl and the host read it.
    ParticipantRecord record() const;
    // Who it is, for the journal's fields of a line about it (its pack, slot and life),
    // with the event journal's kind or the log's topic the line is under.
    LogFields log_fields(std::string event = {}) const;
    // The RequestFailed that answers request `correlation`, with how its last life ended.
    Message failure(FailureReason reason, std::uint64_t correlation) const;
    // Answers every request sent to it (and, with `include_queued`, every one still
    // waiting for it) with a RequestFailed of `reason`.
    void fail_requests(FailureReason reason, bool include_queued);
};

// A RequestFailed message, as the supervisor answers a request it could not deliver.
Message request_failed(const RequestFailed& payload, std::uint32_t generation, std::uint64_t correlation);

// The environment a participant's process starts with: the variables its pack allows from
// ours, its own, and those that attach it to its slot (`attach`).
std::map<std::string, std::string> child_environment(const PackConfig& pack, const worker::WorkerEnvironment& attach);

// "exited with status N" or "killed by SIGNAME", for the line that says a life ended.
std::string describe_exit(int status, int signal);

}  // namespace comfy::supervisor
