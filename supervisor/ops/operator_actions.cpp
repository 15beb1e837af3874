// The operator's actions on the supervisor, from the control socket: restart, stop,
// start and release one pack; free and retry for all (as SIGUSR1 and SIGHUP); and the
// figures comfyctl top needs beyond the segment.
#include "supervisor/ops/operator_actions.hpp"

#include "comfy/version.hpp"
#include "shared/byte_size.hpp"
#include "supervisor/ctl/segment_report.hpp"

#include <unistd.h>

#include <algorithm>

namespace comfy::supervisor {

namespace {

ActionAnswer done(std::string message) { return {std::nullopt, std::move(message), nlohmann::json::object()}; }

ActionAnswer refused(std::string message) {
    return {ctl::ControlError::refused, std::move(message), nlohmann::json::object()};
}

// As comfyctl and the metrics name it.
std::string state_text(ParticipantState state) { return ctl::state_name(static_cast<std::uint8_t>(state)); }

}  // namespace

OperatorActions::OperatorActions(WorkerAccess& lives, ReleaseScheduler& releases, Figures figures)
    : lives_(lives), releases_(releases), figures_(figures) {}

ControlHandlers OperatorActions::handlers() {
    return ControlHandlers{
        [this](const std::string& pack) { return restart(pack); },
        [this](const std::string& pack) { return stop(pack); },
        [this](const std::string& pack) { return start(pack); },
        [this](const std::string& pack, std::optional<std::uint64_t> pins) { return release(pack, pins); },
        [this] {
            releases_.release_everything(FullReleaseReason::operator_request);
            return done("asked every running participant for a full release");
        },
        [this] {
            const auto failed = retry_failed();
            return done(failed == 0 ? std::string("no pack is failed")
                                    : "restarting " + std::to_string(failed) + " failed pack(s)");
        },
        [this] {
            return ActionAnswer{std::nullopt, std::string("comfy-supervisor ") + kVersion,
                                {{"reserve_bytes", figures_.reserve_bytes},
                                 {"device_total_bytes", figures_.device_total_bytes},
                                 {"pid", ::getpid()},
                                 {"version", kVersion}}};
        }};
}

std::size_t OperatorActions::retry_failed() {
    std::size_t failed = 0;
    for (const auto& worker : lives_.workers()) {
        if (worker->state != ParticipantState::failed) continue;
        ++failed;
        lives_.happened(LogLevel::info, *worker, "operator", "operator asked to retry the failed pack; starting it");
        worker->restarts.reset();
        lives_.start_worker(*worker);
    }
    return failed;
}

WorkerProcess* OperatorActions::pack_named(const std::string& name) {
    const auto& workers = lives_.workers();
    const auto found = std::find_if(workers.begin(), workers.end(), [&](const auto& w) { return w->pack.name == name; });
    return found == workers.end() ? nullptr : found->get();
}

ActionAnswer OperatorActions::unknown_pack(const std::string& name) {
    std::string known;
    nlohmann::json packs = nlohmann::json::array();
    for (const auto& worker : lives_.workers()) {
        known += (known.empty() ? "" : ", ") + worker->pack.name;
        packs.push_back(worker->pack.name);
    }
    return {ctl::ControlError::unknown_pack, "no pack named '" + ctl::printable(name, kPackNameBytes) + "'; the packs are " + known, {{"packs", packs}}};
}

ActionAnswer OperatorActions::stop(const std::string& name) {
    WorkerProcess* worker = pack_named(name);
    if (worker == nullptr) return unknown_pack(name);
    if (lives_.shutting_down()) return refused("the supervisor is shutting down");
    if (worker->state == ParticipantState::stopped) return done(name + " is stopped already");
    const std::string again = "; comfyctl start " + name + " starts it again";
    if (worker->alive()) {
        const pid_t pid = worker->process.pid;
        worker->operator_intent = OperatorIntent::stop;
        lives_.terminate(*worker, "stopped by an operator");
        return done("stopping " + name + " (pid " + std::to_string(pid) + "); it stays stopped" + again);
    }
    // Dead and waiting for its restart, or failed: no process to end.
    worker->restart_timer.cancel();
    lives_.keep_stopped(*worker);
    return done(name + " stopped" + again);
}

ActionAnswer OperatorActions::start(const std::string& name) {
    WorkerProcess* worker = pack_named(name);
    if (worker == nullptr) return unknown_pack(name);
    if (lives_.shutting_down()) return refused("the supervisor is shutting down");
    if (worker->alive() && worker->operator_intent == OperatorIntent::stop) {
        worker->operator_intent = OperatorIntent::restart;
        return done(name + " was stopping; it starts again once its worker has exited");
    }
    if (worker->state != ParticipantState::stopped && worker->state != ParticipantState::failed) {
        return refused(name + " is not stopped or failed but " + state_text(worker->state) + "; comfyctl restart " +
                       name + " restarts it");
    }
    lives_.happened(LogLevel::info, *worker, "operator", "started by an operator");
    worker->restarts.reset();
    lives_.start_worker(*worker);
    return done("starting " + name);
}

ActionAnswer OperatorActions::restart(const std::string& name) {
    WorkerProcess* worker = pack_named(name);
    if (worker == nullptr) return unknown_pack(name);
    if (lives_.shutting_down()) return refused("the supervisor is shutting down");
    if (worker->alive()) {
        const pid_t pid = worker->process.pid;
        worker->operator_intent = OperatorIntent::restart;
        lives_.terminate(*worker, "restarted by an operator");
        return done("restarting " + name + ": stopping pid " + std::to_string(pid) + ", then starting it at once");
    }
    // No process: started now, whether it was stopped, failed or waiting out a backoff.
    worker->restart_timer.cancel();
    lives_.happened(LogLevel::info, *worker, "operator", "restarted by an operator");
    worker->restarts.reset();
    lives_.start_worker(*worker);
    return done("starting " + name);
}

ActionAnswer OperatorActions::release(const std::string& name, std::optional<Bytes> pins) {
    WorkerProcess* worker = pack_named(name);
    if (worker == nullptr) return unknown_pack(name);
    if (!worker->up()) return refused(name + " is " + state_text(worker->state) + ", not running: it holds nothing");
    const std::string see = "; comfyctl events shows what it freed";
    if (pins) {
        lives_.happened(LogLevel::info, *worker, "operator",
                 "operator asked for a release of " + format_byte_size(*pins) + " of pinned memory",
                 {{"bytes", *pins}});
        lives_.deliver(*worker, encode(ReleasePins{*pins}, worker->generation));
        return done("asked " + name + " to release " + format_byte_size(*pins) + " of pinned memory" + see);
    }
    lives_.happened(LogLevel::info, *worker, "operator", "operator asked for a full release");
    lives_.deliver(*worker, encode(FullRelease{static_cast<std::uint32_t>(FullReleaseReason::operator_request), 0},
                            worker->generation));
    return done("asked " + name + " for a full release" + see);
}

bool OperatorActions::after_exit(WorkerProcess& worker) {
    switch (std::exchange(worker.operator_intent, OperatorIntent::none)) {
        case OperatorIntent::none: return false;
        case OperatorIntent::stop: lives_.keep_stopped(worker); return true;
        case OperatorIntent::restart:
            // Not a crash: no backoff, and nothing counted against the restart limit.
            lives_.happened(LogLevel::info, worker, "restarting", "restarting now, as an operator asked");
            lives_.start_worker(worker);
            return true;
        case OperatorIntent::cancelled:
            // Nor is a node that ignored ComfyUI's Cancel: the user asked for it to end.
            lives_.happened(LogLevel::info, worker, "restarting", "restarting now: ComfyUI's Cancel ended its node");
            lives_.start_worker(worker);
            return true;
    }
    return false;
}

}  // namespace comfy::supervisor
