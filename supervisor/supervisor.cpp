#include "supervisor/supervisor.hpp"

#include "shared/byte_size.hpp"
#include "supervisor/ctl/control_path.hpp"
#include "supervisor/ctl/report_format.hpp"
#include "supervisor/lifecycle/handshake.hpp"
#include "supervisor/lifecycle/liveness.hpp"
#include "supervisor/lifecycle/message_pump.hpp"
#include "supervisor/lifecycle/start_failures.hpp"
#include "supervisor/memory/segment_upkeep.hpp"
#include "supervisor/ops/log/log.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace comfy::supervisor {

namespace {

using Clock = std::chrono::steady_clock;

// Slot 0 is the ComfyUI host's, filled only when the config has one; pack i runs in
// slot i + 1 either way.
constexpr std::uint32_t kHostSlot = 0;
constexpr std::uint32_t kFirstPackSlot = 1;
// What one participant can make us log, per topic: this many lines a window, then a count.
constexpr std::size_t kLogLinesPerWindow = 20;
constexpr std::chrono::seconds kLogWindow{10};

}  // namespace

Supervisor::Supervisor(Config config, const std::string& instance)
    : config_(std::move(config)),
      instance_(instance),
      cuda_(open_configured_device(config_.device, config_.source)),
      segment_(create_fresh_segment(instance, config_)),
      view_(view_of(segment_)),
      published_view_(segment_.published()->base(), view_.capacities()),
      writes_(view_, published_view_),
      device_use_([&]() -> std::optional<SimulatedDeviceUse> {
          if (cuda_) return std::nullopt;
          return std::make_optional<SimulatedDeviceUse>(view_.device_total_bytes(), view_.capacities().participants,
                                                        writes_);
      }()),
      census_(view_, device_use_ ? &*device_use_ : nullptr, cuda_.get()),
      pump_(io_, *this,
            {[this](WorkerProcess& worker, const MessageSlot& slot) { handle_message(worker, slot); },
             [this](WorkerProcess& worker) { flush(worker); }, [this] { publish_census_reports(); }}),
      signals_(io_, SIGINT, SIGTERM),
      operator_signals_(io_, SIGUSR1, SIGHUP),
      templates_(io_, config_.packs, config_.comfyui, instance_),
      strays_(io_, *this, [this] { finish_if_done(); },  // the last stray of a shutdown reaped
              [this](pid_t pid) { return templates_.owns(pid); }),
      heartbeat_timer_(io_),
      shutdown_timer_(io_),
      host_requests_(io_, *this),
      bridge_(workers_, [this](WorkerProcess& worker, const std::string& reason) { terminate(worker, reason); },
              host_requests_),
      log_limiter_(kLogLinesPerWindow, kLogWindow),
      memory_(config_, *this, census_, writes_, journal_),
      releases_(config_.host, *this, census_, memory_, journal_),
      ops_(io_, OpsEndpoints::Sources{*this, config_, instance_, segment_, census_, memory_, releases_, journal_,
                                      *this, refusals_}),
      operator_(*this, releases_, {config_.memory.reserve_bytes, view_.device_total_bytes()}) {
    // The table is indexed by slot from first_slot_: the host's slot 0 is in it only when
    // configured, so without a host nothing changes.
    first_slot_ = config_.comfyui ? kHostSlot : kFirstPackSlot;
    const std::size_t keep_limit = config_.limits.capacities.ledger_entries;
    if (config_.comfyui) {
        workers_.push_back(
            std::make_unique<WorkerProcess>(*config_.comfyui, kHostSlot, ParticipantKind::host, io_, keep_limit));
    }
    for (std::size_t i = 0; i < config_.packs.size(); ++i) {
        workers_.push_back(std::make_unique<WorkerProcess>(
            config_.packs[i], kFirstPackSlot + static_cast<std::uint32_t>(i), ParticipantKind::worker, io_, keep_limit));
        packs_by_name_.emplace(config_.packs[i].name, workers_.back().get());
    }
}

Supervisor::~Supervisor() {
    // run() reaps every child; this only matters when run() was never called or threw.
    for (auto& worker : workers_) {
        if (worker->alive()) {
            ::killpg(worker->process.pid, SIGKILL);
            ::waitpid(worker->process.pid, nullptr, 0);
        }
    }
}

int Supervisor::run() {
    log_line(supervised_device_text(config_.device, cuda_.get()));
    signals_.async_wait([this](const boost::system::error_code& ec, int signal) {
        if (!ec) begin_shutdown(std::string("received SIG") + sigabbrev_np(signal));
    });
    watch_signals();
    strays_.start();
    start_control();
    const bool with_host = !workers_.empty() && workers_.front()->kind == ParticipantKind::host;
    log_line("segment " + segment_.name() + " created; starting " + (with_host ? "the ComfyUI host and " : "") +
             std::to_string(workers_.size() - (with_host ? 1 : 0)) + " worker(s)");
    ops_.start();
    // The host at once; the packs once their warm templates are ready (or cannot be), so
    // that their first workers fork from them.
    if (with_host) start_worker(*workers_.front());
    templates_.start([this] {
        for (auto& worker : workers_) {
            if (worker->kind != ParticipantKind::host && !shutting_down_) start_worker(*worker);
        }
    });
    pump_.start();
    check_heartbeats();
    io_.run();
    for (auto& worker : workers_) {
        if (worker->output) worker->output->drain_now();
    }
    for (const auto& line : log_limiter_.flush()) log_line(line);
    log_line("all workers stopped; segment removed");
    return 0;
}

// ---- spawning, death and restart ----

void Supervisor::start_worker(WorkerProcess& worker) {
    worker.note.clear();
    worker.node_classes = kNodeClassesUncounted;
    worker.cannot_start.clear();
    // Asked at each start, not once at load: one pack's environment deleted or unreadable
    // fails that pack alone, and once rebuilt it starts at its retry.
    if (auto problem = start_problem(worker.pack)) {
        worker.cannot_start = std::move(*problem);
        give_up(worker);
        return;
    }
    ++worker.generation;
    worker.token = new_token();
    worker.kill_reason.clear();
    worker.joined = false;
    try {
        worker.open_region(view_);
        pump_.watch(worker);  // this life's doorbell, armed before the child can write its Hello
    } catch (const std::exception& e) {
        happened(LogLevel::error, worker, "failed", std::string("cannot start: ") + e.what());
        schedule_restart(worker);
        return;
    }
    census_.watch(worker.slot, worker.region_view.census(), worker.generation);
    worker.census_problems = 0;

    worker::WorkerEnvironment attach;
    attach.instance = instance_;
    attach.slot = worker.slot;
    attach.generation = worker.generation;
    attach.token = worker.token;
    attach.doorbell_fd = worker.pump.doorbell->fd();
    attach.segment_fd = segment_.read_only_fd();
    attach.region_fd = worker.region.fd();
    attach.heartbeat_interval = std::max(Milliseconds(10), config_.limits.heartbeat_timeout / 5);
    if (cuda_) attach.cuda_device = config_.device.cuda_index;
    worker.state = ParticipantState::spawning;
    worker.started_at_ms = ctl::wall_clock_ms();
    worker.last_node.clear();  // a new life has started no node yet
    publish(worker);
    std::string forked_from;  // the warm template its process came from, if any
    try {
        // Ours closes when this scope ends: the child holds the only other copy.
        const auto bridge = bridge_.open_life(worker);
        if (bridge) {
            attach.bridge_fd = bridge->control.get();
            attach.arena_fd = bridge->arena.get();
            attach.arena_bytes = bridge->arena_bytes;
        }
        worker.output = ChildOutput::open(io_, worker.log_fields());
        const SpawnRequest request{worker.pack.command, worker.pack.args, child_environment(worker.pack, attach),
                                   worker.pack.working_directory, attach.descriptors(), worker.output->write_end()};
        worker.process = templates_.start_process(worker.pack, request, forked_from);
        worker.output->start();
    } catch (const std::exception& e) {
        bridge_.close_life(worker);
        happened(LogLevel::error, worker, "failed", std::string("cannot start: ") + e.what());
        worker.last_exit_status = -1;
        worker.last_exit_signal = 0;
        schedule_restart(worker);
        return;
    }
    ++worker.starts;
    publish(worker);
    notify(WorkerEvent::spawned, worker);
    happened(LogLevel::info, worker, "spawned",
             "spawned pid " + std::to_string(worker.process.pid) + " (generation " + std::to_string(worker.generation) +
                 (forked_from.empty() ? ")" : ", forked from " + forked_from + ")"),
             {{"pid", worker.process.pid}, {"generation", worker.generation}});
    bridge_.spawned(worker);
    watch_exit(worker);
    const bool host = worker.kind == ParticipantKind::host;
    const auto handshake = host ? config_.limits.host_handshake_timeout : config_.limits.handshake_timeout;
    worker.handshake_timer.expires_after(handshake);
    worker.handshake_timer.async_wait([this, &worker, generation = worker.generation, handshake,
                                       key = host ? "host_handshake_timeout_ms" : "handshake_timeout_ms"](
                                          const boost::system::error_code& ec) {
        if (ec || worker.generation != generation || worker.joined) return;
        terminate(worker, "no Hello within " + std::to_string(handshake.count()) + " ms; raise limits." + key +
                              " if its start-up needs longer");
    });
}

void Supervisor::watch_exit(WorkerProcess& worker) {
    worker.pidfd.assign(worker.process.pidfd);
    worker.pidfd.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                            [this, &worker](const boost::system::error_code& ec) {
                                if (!ec) on_exit(worker);
                            });
}

void Supervisor::on_exit(WorkerProcess& worker) {
    const auto now = Clock::now();  // of its death, for the restart decision told and made
    const pid_t pid = worker.process.pid;
    const std::string how = worker.reap();
    const char* who = worker.kind == ParticipantKind::host ? "pid " : "worker pid ";
    // A death the supervisor did not ask for, or asked for because the worker misbehaved.
    const bool expected = shutting_down_ || worker.operator_intent != OperatorIntent::none ||
                          (worker.last_exit_signal == 0 && worker.last_exit_status == 0);
    happened(expected ? LogLevel::info : LogLevel::warning, worker, "exited",
             who + std::to_string(pid) + " (generation " + std::to_string(worker.generation) + ") " + how,
             {{"pid", pid},
              {"generation", worker.generation},
              {"status", worker.last_exit_status},
              {"signal", worker.last_exit_signal},
              {"reason", worker.kill_reason}});
    notify(WorkerEvent::exited, worker);
    strays_.life_ended(worker);
    bridge_.exited(worker, how, restarts_after_exit(worker, now));

    // Its memory went with the process: return its device use and drop its census, its
    // region and its ledger entries (an eviction waiting on it counts as done). The table
    // says it is dead, and the simulated device's account has its bytes back, before its
    // death is arbitrated: a grant its death allows must not reach an asker that would
    // still find them taken (comfyctl counts live participants' census bytes).
    set_state(worker, ParticipantState::dead);
    if (device_use_) device_use_->forget(worker.slot);
    memory_.forget(worker.slot);
    census_.forget(worker.slot);
    publish_census_reports();
    pump_.forget(worker);
    worker.close_region();
    memory_.arbitrate(arbiter::event::Left{{worker.slot, worker.generation}});
    worker.fail_requests(FailureReason::worker_died, false);
    if (shutting_down_) {
        set_state(worker, ParticipantState::dead);
        worker.fail_requests(FailureReason::shutting_down, true);
        finish_if_done();
        return;
    }
    if (operator_.after_exit(worker)) return;
    schedule_restart(worker, now);
}

bool Supervisor::restarts_after_exit(const WorkerProcess& worker, Clock::time_point now) const {
    if (shutting_down_) return false;
    switch (worker.operator_intent) {
        case OperatorIntent::stop: return false;
        case OperatorIntent::restart:
        case OperatorIntent::cancelled: return true;
        case OperatorIntent::none: break;
    }
    return !worker.cannot_run() && !worker.restarts.gives_up_at(now);
}

void Supervisor::schedule_restart(WorkerProcess& worker, Clock::time_point now) {
    // No restart is counted for a pack that cannot run: none is made.
    const auto decision = worker.cannot_run() ? RestartTracker::Decision{true, {}} : worker.restarts.on_death(now);
    if (decision.give_up) {
        give_up(worker);
        return;
    }
    set_state(worker, ParticipantState::dead);
    // A restart nobody asked for (an operator's goes through operator_actions.cpp): a
    // warning, kept with the failures, so that it outlasts the routine events around it.
    happened(LogLevel::warning, worker, "restarting",
             "restarting in " + std::to_string(decision.delay.count()) + " ms", {{"delay_ms", decision.delay.count()}});
    worker.restart_timer.expires_after(decision.delay);
    worker.restart_timer.async_wait([this, &worker](const boost::system::error_code& ec) {
        if (!ec && !shutting_down_) start_worker(worker);
    });
}

void Supervisor::give_up(WorkerProcess& worker) {
    const std::string why = worker.why_given_up();
    worker.note = "failed: " + why;
    // Published even when it was failed already (a retry that found the same problem): the
    // note is this try's.
    worker.state = ParticipantState::failed;
    publish(worker);
    happened(LogLevel::error, worker, "failed", "failed: " + why, {{"reason", why}});
    bridge_.failed(worker, why);
    worker.fail_requests(FailureReason::worker_failed, true);
    check_all_started();
}

void Supervisor::terminate(WorkerProcess& worker, const std::string& reason) {
    if (!worker.alive() || !worker.kill_reason.empty()) return;
    worker.kill_reason = reason;
    const bool asked = shutting_down_ || worker.operator_intent != OperatorIntent::none;
    happened(asked ? LogLevel::info : LogLevel::warning, worker, "stopping",
             "stopping pid " + std::to_string(worker.process.pid) + ": " + reason,
             {{"pid", worker.process.pid}, {"reason", reason}});
    set_state(worker, ParticipantState::draining);
    ::killpg(worker.process.pid, SIGTERM);
    ::killpg(worker.process.pid, SIGCONT);  // a stopped process must run to see SIGTERM
    worker.kill_timer.expires_after(config_.limits.shutdown_grace);
    worker.kill_timer.async_wait([&worker](const boost::system::error_code& ec) {
        if (!ec && worker.alive()) ::killpg(worker.process.pid, SIGKILL);
    });
}

// ---- messages from workers ----

void Supervisor::publish_census_reports() {
    for (const auto slot : census_.take_changed()) writes_.census(slot, census_.report(slot));
}

void Supervisor::handle_message(WorkerProcess& worker, const MessageSlot& slot) {
    const auto decoded = decode(slot);
    if (!decoded.ok()) {
        terminate(worker, "sent an invalid message: " + decoded.describe());
        return;
    }
    const Message& message = decoded.message;
    if (message.header.generation != worker.generation) return;  // from an older life of this slot
    census_.heard_from(worker.slot);  // what it wrote before this message is what it means by it
    // Being stopped: nothing more it sends is acted on, however much it sends until it is gone.
    if (!worker.kill_reason.empty()) return;
    if (!worker.joined) {
        accept_hello(worker, message);
        return;
    }
    switch (message.type()) {
        case MessageType::node_started:
            // A node runs in a participant that is ready: busy is never a way round its start-up.
            if (worker.starting()) {
                terminate(worker, "sent node_started before ready");
                break;
            }
            on_node_started(worker, std::get<NodeStarted>(message.payload), message.header.correlation);
            break;
        case MessageType::node_finished: on_node_finished(worker, std::get<NodeFinished>(message.payload)); break;
        case MessageType::work_result: {
            const auto request = worker.in_flight.find(message.header.correlation);
            if (request == worker.in_flight.end()) break;
            auto reply = std::move(request->second.reply);
            worker.in_flight.erase(request);
            reply(message);
            break;
        }
        case MessageType::hello:
            terminate(worker, "sent a second Hello");
            break;
        case MessageType::ready:
            if (const auto problem = ready_problem(worker)) {
                terminate(worker, *problem);
            } else if (!shutting_down_) {  // being ended by SIGTERM: never shown ready now
                worker.handshake_timer.cancel();
                worker.node_classes = std::get<Ready>(message.payload).node_classes;
                become_ready(worker);
            }
            break;
        case MessageType::pin_request:
            if (memory_.may_ask(worker, message.type())) releases_.answer_pin_request(worker, message);
            break;
        case MessageType::device_allocate:
        case MessageType::device_release: on_device_use(worker, message); break;
        default: memory_.handle(worker, message); break;
    }
}

void Supervisor::on_device_use(WorkerProcess& worker, const Message& message) {
    if (!device_use_) {
        terminate(worker, "sent a " + std::string(to_string(message.type())) + ", but the device is a real one");
        return;
    }
    if (message.type() == MessageType::device_release) {
        device_use_->release(worker.slot, std::get<DeviceRelease>(message.payload).bytes);
        return;
    }
    if (!memory_.may_ask(worker, message.type())) return;
    DeviceAllocation answer{};
    answer.granted = device_use_->allocate(worker.slot, std::get<DeviceAllocate>(message.payload).bytes) ? 1 : 0;
    deliver(worker, encode(answer, worker.generation, message.header.correlation));
}

// ---- memory arbitration ----

void Supervisor::happened(LogLevel level, const WorkerProcess& worker, const char* kind, const std::string& text,
                          nlohmann::json figures) {
    log_line(level, worker.pack.name + ": " + text, worker.log_fields(kind));
    journal_.record(kind, worker.pack.name, text, std::move(figures), level);
}

WorkerProcess* Supervisor::live(std::uint32_t slot, std::uint32_t generation) {
    if (slot < first_slot_ || slot - first_slot_ >= workers_.size()) return nullptr;
    WorkerProcess& worker = *workers_[slot - first_slot_];
    return worker.generation == generation && worker.alive() ? &worker : nullptr;
}

void Supervisor::log_about(const WorkerProcess& worker, const std::string& topic, std::string line, LogFields about) {
    if (about.pack.empty()) {
        LogFields own = worker.log_fields();
        own.model = std::move(about.model);
        own.model_id = about.model_id;
        about = std::move(own);
    }
    if (about.event.empty()) about.event = topic;
    for (auto& out : log_limiter_.pass(worker.pack.name, topic, std::move(line), Clock::now())) {
        log_line(LogLevel::info, out, about);
    }
}

void Supervisor::accept_hello(WorkerProcess& worker, const Message& message) {
    if (const auto problem = hello_problem(worker, message)) {
        terminate(worker, *problem);
        return;
    }
    const auto& hello = std::get<Hello>(message.payload);
    worker.handshake_timer.cancel();
    worker.capabilities = hello.capabilities;
    worker.idle_since = Clock::now();
    worker.idle_released = false;
    worker.keeping.clear();
    // Relaxed: a counter compared with its own earlier values only.
    worker.last_heartbeat = worker.region_view.census().heartbeat.load(std::memory_order_relaxed);
    worker.heartbeat_seen_at = Clock::now();
    worker.joined = true;
    deliver(worker, encode(HelloAck{worker.slot, worker.generation, config_.memory.reserve_bytes,
                                    view_.device_total_bytes()},
                           worker.generation));
    memory_.arbitrate(arbiter::event::Joined{{worker.slot, worker.generation}, worker.pack.name});
    if ((hello.capabilities & kCapReadyLater) == 0) {
        become_ready(worker);
        return;
    }
    // Joined before its start-up (a pack's import), which the Hello's time-out does not
    // bound: ready_timeout does, from here.
    happened(LogLevel::info, worker, "joined",
             "joined (pid " + std::to_string(worker.process.pid) + ", generation " +
                 std::to_string(worker.generation) + "); ready once its start-up is done",
             {{"pid", worker.process.pid}, {"generation", worker.generation}});
    worker.handshake_timer.expires_after(config_.limits.ready_timeout);
    const auto generation = worker.generation;
    worker.handshake_timer.async_wait([this, &worker, generation](const boost::system::error_code& ec) {
        if (ec || worker.generation != generation || !worker.starting()) return;
        terminate(worker, "not ready within " + std::to_string(config_.limits.ready_timeout.count()) +
                              " ms of its Hello; raise limits.ready_timeout_ms if its start-up needs longer");
    });
}

void Supervisor::become_ready(WorkerProcess& worker) {
    const auto warning = ready_warning(worker);
    if (warning) worker.note = "warning: " + *warning;
    set_state(worker, ParticipantState::ready);
    happened(LogLevel::info, worker, "ready",
             "ready (pid " + std::to_string(worker.process.pid) + ", generation " + std::to_string(worker.generation) +
                 ")",
             {{"pid", worker.process.pid}, {"generation", worker.generation}});
    // Once a life, kept with the failures: ready, yet nothing of it can be used.
    if (warning) happened(LogLevel::warning, worker, "no_nodes", *warning, {{"node_classes", worker.node_classes}});
    notify(WorkerEvent::ready, worker);
    dispatch_queued(worker);
    check_all_started();
}

// ---- messages to workers ----

void Supervisor::deliver(WorkerProcess& worker, const MessageSlot& message) {
    worker.outbox.push_back(message);
    flush(worker);
}

void Supervisor::flush(WorkerProcess& worker) {
    while (!worker.outbox.empty() && worker.to_worker) {
        const auto state = worker.to_worker->try_push(worker.outbox.front());
        if (state == ipc::PushResult::full) return;  // retried after its next message or tick
        if (state == ipc::PushResult::corrupt) {
            terminate(worker, "its command ring is corrupt");
            return;
        }
        worker.answers_due.sent(worker.outbox.front());
        worker.outbox.pop_front();
    }
}

void Supervisor::submit(const std::string& pack, const std::string& node, std::uint64_t epoch, std::uint32_t index,
                        ReplyHandler reply) {
    // Work goes to packs only: the host runs its own prompts. Found by name in one lookup,
    // whatever the number of packs.
    const auto found = packs_by_name_.find(pack);
    WorkRequest request{};
    request.prompt_epoch = epoch;
    request.node_index = index;
    std::strncpy(request.node_name, node.c_str(), sizeof request.node_name - 1);
    PendingRequest pending{encode(request, 0, next_correlation_++), std::move(reply), node};
    if (found == packs_by_name_.end()) {
        const RequestFailed no_pack{static_cast<std::uint32_t>(FailureReason::no_such_pack), -1, 0, 0};
        pending.reply(request_failed(no_pack, 0, pending.message.header.correlation));
        return;
    }
    WorkerProcess& worker = *found->second;
    if (shutting_down_ || worker.state == ParticipantState::failed || worker.state == ParticipantState::stopped) {
        const auto reason = shutting_down_                                 ? FailureReason::shutting_down
                            : worker.state == ParticipantState::stopped ? FailureReason::worker_stopped
                                                                         : FailureReason::worker_failed;
        pending.reply(worker.failure(reason, pending.message.header.correlation));
        return;
    }
    releases_.start_epoch(epoch);
    worker.queued.push_back(std::move(pending));
    dispatch_queued(worker);
}

void Supervisor::dispatch_queued(WorkerProcess& worker) {
    if (!worker.up()) return;
    while (!worker.queued.empty()) {
        PendingRequest request = std::move(worker.queued.front());
        worker.queued.pop_front();
        request.message.header.generation = worker.generation;
        worker.in_flight.emplace(request.message.header.correlation,
                                 SentRequest{std::move(request.reply), std::move(request.node)});
        deliver(worker, request.message);
    }
}

// ---- liveness ----

void Supervisor::check_heartbeats() {
    const auto now = Clock::now();
    census_.refresh();
    census_.take_changed();  // every live one is republished below, with its heartbeat
    for (auto& worker_ptr : workers_) {
        WorkerProcess& worker = *worker_ptr;
        if (worker.alive()) writes_.census(worker.slot, census_.report(worker.slot));
        if (!worker.up() && !worker.starting()) continue;
        const auto census = static_cast<CensusStatus>(census_.report(worker.slot).status);
        if (const auto problem = shared_memory_problem(worker, census)) terminate(worker, *problem);
        if (const auto problem = heartbeat_problem(worker, now, config_.limits.heartbeat_timeout)) {
            terminate(worker, *problem);
        }
        flush(worker);
    }
    memory_.arbitrate(arbiter::event::Tick{});
    keep_published();
    for (const auto& line : log_limiter_.ended(now)) log_line(line);
    releases_.tick();
    // A tenth of the time-out, so a hang is seen within 10% of it; at most 250 ms, so the
    // census reports comfyctl reads are never older than that, whatever the time-out.
    heartbeat_timer_.expires_after(std::clamp(config_.limits.heartbeat_timeout / 10, Milliseconds(10), Milliseconds(250)));
    heartbeat_timer_.async_wait([this](const boost::system::error_code& ec) {
        if (!ec) check_heartbeats();
    });
}

void Supervisor::keep_published() {
    const auto line = republish_if_damaged(segment_);
    if (!line) return;
    for (const auto& out : log_limiter_.pass("segment", "published copy", *line, Clock::now())) {
        log_line(LogLevel::warning, out);
    }
}

// ---- the participant table ----

void Supervisor::set_state(WorkerProcess& worker, ParticipantState state) {
    if (worker.state == state) return;
    worker.state = state;
    publish(worker);
}

void Supervisor::publish(const WorkerProcess& worker) {
    writes_.participant(worker.slot, worker.record());
}

// ---- start-up and shutdown ----

void Supervisor::check_all_started() {
    if (all_started_.empty()) return;
    const bool all = std::all_of(workers_.begin(), workers_.end(), [](const auto& w) {
        return w->up() || w->state == ParticipantState::failed || w->state == ParticipantState::stopped;
    });
    if (!all) return;
    for (const auto& callback : std::exchange(all_started_, {})) callback();
}

void Supervisor::begin_shutdown(const std::string& why) {
    if (shutting_down_) return;
    shutting_down_ = true;
    log_line("shutting down (" + why + "): asking every worker to finish within " +
             std::to_string(config_.limits.shutdown_grace.count()) + " ms");
    for (const auto& callback : shutdown_begun_) callback();
    signals_.cancel();
    operator_signals_.cancel();
    ops_.stop();
    if (control_) control_->stop();
    heartbeat_timer_.cancel();
    templates_.stop();
    for (auto& worker : workers_) {
        worker->restart_timer.cancel();
        worker->fail_requests(FailureReason::shutting_down, true);
        if (!worker->alive()) continue;
        if (worker->up()) {
            set_state(*worker, ParticipantState::draining);
            deliver(*worker, encode(Shutdown{static_cast<std::uint32_t>(config_.limits.shutdown_grace.count()), 0},
                                    worker->generation));
        } else {
            ::killpg(worker->process.pid, SIGTERM);
        }
    }
    shutdown_timer_.expires_after(config_.limits.shutdown_grace);
    shutdown_timer_.async_wait([this](const boost::system::error_code& ec) {
        if (ec) return;
        for (auto& worker : workers_) {
            if (!worker->alive()) continue;
            log_line(LogLevel::warning, worker->pack.name + ": still running after the grace period; killing it",
                     worker->log_fields("stopping"));
            ::killpg(worker->process.pid, SIGKILL);
        }
    });
    finish_if_done();
}

void Supervisor::finish_if_done() {
    if (!shutting_down_) return;
    if (std::any_of(workers_.begin(), workers_.end(), [](const auto& w) { return w->alive(); })) return;
    if (strays_.unreaped() > 0) return;  // killed; each death is a SIGCHLD that sweeps again
    shutdown_timer_.cancel();
    pump_.stop();
    io_.stop();
}

Totals Supervisor::totals() const { return totals_of(memory_, releases_, workers_); }

std::vector<CensusRow> Supervisor::census_rows() const { return census_rows_of(workers_, census_); }

// ---- release paths ----

void Supervisor::on_node_started(WorkerProcess& worker, const NodeStarted& node, std::uint64_t correlation) {
    // A node we sent names itself by its request; one ComfyUI called has no name here.
    const auto sent = worker.in_flight.find(correlation);
    auto node_name = sent != worker.in_flight.end() ? sent->second.node : std::string();
    const bool callback = node.activity == static_cast<std::uint32_t>(NodeActivity::callback);
    const bool other_activity = callback != worker.in_callback;
    const bool renamed = node_name != worker.last_node || other_activity;
    worker.last_node = std::move(node_name);
    worker.in_callback = callback;
    if (worker.state != ParticipantState::busy || other_activity) {
        worker.busy_since_ms = ctl::wall_clock_ms();  // since what runs now began
    }
    // set_state publishes a change of state, with the name; busy already, the name (or
    // whether a callback) alone.
    if (renamed && worker.state == ParticipantState::busy) publish(worker);
    set_state(worker, ParticipantState::busy);
    memory_.arbitrate(arbiter::event::Busy{{worker.slot, worker.generation}, true});
    releases_.node_started(worker, node.prompt_epoch);
}

void Supervisor::on_node_finished(WorkerProcess& worker, const NodeFinished& node) {
    if (worker.state == ParticipantState::busy) set_state(worker, ParticipantState::ready);
    memory_.arbitrate(arbiter::event::Busy{{worker.slot, worker.generation}, false});
    releases_.node_finished(worker, node);
}

void Supervisor::start_control() {
    control_.emplace(io_, ctl::control_socket_path(instance_), operator_.handlers(), journal_, refusals_);
    control_->start();
    log_line("control: listening on " + control_->path().string() + " (comfyctl, this user only)");
}

void Supervisor::keep_stopped(WorkerProcess& worker) {
    const std::string why = "stopped by an operator (comfyctl start " + worker.pack.name + " starts it again)";
    worker.note.clear();  // a failure's is no longer why it is not running
    set_state(worker, ParticipantState::stopped);
    happened(LogLevel::info, worker, "stopped", why);
    bridge_.failed(worker, why);
    worker.fail_requests(FailureReason::worker_stopped, true);
    check_all_started();
}

void Supervisor::watch_signals() {
    operator_signals_.async_wait([this](const boost::system::error_code& ec, int signal) {
        if (ec || shutting_down_) return;
        if (signal == SIGUSR1) releases_.release_everything(FullReleaseReason::operator_request);
        if (signal == SIGHUP) operator_.retry_failed();
        watch_signals();
    });
}

}  // namespace comfy::supervisor
