// The faults: each finds its target as the segment shows it, hits it, and waits for the
// recovery the supervisor owes (a new life of the participant up, or a new supervisor up
// on the same instance), a breach when it does not come.
#include "tests/soak/soak.hpp"

#include "tests/soak/process_probe.hpp"
#include "tests/soak/supervisor_log.hpp"
#include "tests/soak/target_process.hpp"

#include <signal.h>

#include <thread>

namespace comfy::soak {

namespace {

using std::chrono::seconds;

constexpr seconds kRecoveryTimeout{30};
constexpr seconds kEvictionWait{15};  // for the next eviction to be asked
constexpr seconds kOutcomeTimeout{15};
constexpr seconds kEscapedTimeout{5};  // for what an escaping worker started to end after it

}  // namespace

std::optional<std::string> Soak::inject(FaultKind kind) {
    switch (kind) {
        case FaultKind::kill_worker: {
            // The ComfyUI stand-in, a demo pack or the deaf pack, whatever it is doing.
            auto targets = setup_.demo_participants;
            targets.push_back(kDeafPack);
            return kill(targets[plan_.pick(targets.size())], kind);
        }
        case FaultKind::kill_mid_eviction:
        case FaultKind::kill_mid_admission: return kill_at_eviction(kind);
        case FaultKind::stop_short:
        case FaultKind::stop_long: return stop(kind);
        case FaultKind::hostile: return provoke_hostile();
        case FaultKind::hostile_call: return provoke_hostile_call();
        case FaultKind::kill_supervisor: return kill_supervisor();
    }
    return std::nullopt;
}

bool Soak::hit(const Participant& who, int signal, bool fatal) {
    const auto process = TargetProcess::open(who.pid, life().run->pid());
    if (!process) return false;
    life().targeted.insert(who.pid);
    if (!process->signal(signal)) return false;
    if (fatal) life().must_die.insert(who.pid);
    return true;
}

bool Soak::await_replacement(const Participant& who, const std::string& after) {
    const bool replaced = wait_until(
        [&] {
            const auto now = up_now(who.name);
            return now && now->generation > who.generation;
        },
        kRecoveryTimeout);
    if (!replaced && !supervisor_gone()) {
        breach(who.name + " (pid " + std::to_string(who.pid) + ", generation " + std::to_string(who.generation) +
               ") had no new life up within " + std::to_string(kRecoveryTimeout.count()) + " s after " + after);
    }
    return replaced;
}

std::optional<std::string> Soak::kill(const std::string& name, FaultKind kind) {
    const auto who = wait_up(name);
    if (!who) return std::nullopt;
    const std::string what = std::string(fault_name(kind)) + " " + name;
    say(what + " (pid " + std::to_string(who->pid) + ", generation " + std::to_string(who->generation) + ")");
    if (!hit(*who, SIGKILL, true)) return std::nullopt;
    await_replacement(*who, what);
    return fault_name(kind);
}

std::optional<std::string> Soak::kill_at_eviction(FaultKind kind) {
    // Best effort: the owner is killed a few milliseconds after the supervisor logged its
    // ask, so it may have answered already; or the asker, still waiting for its grant.
    std::optional<EvictionAsk> ask;
    watch_log(
        life().run->log().lines().size(),
        [&](const std::string& raw) {
            const auto line = parse_log_line(raw);
            if (line) ask = parse_eviction_ask(line->text);
            return ask.has_value();
        },
        kEvictionWait);
    if (!ask) return std::nullopt;
    const std::uint32_t slot = kind == FaultKind::kill_mid_eviction ? ask->owner_slot : ask->asker_slot;
    if (slot >= setup_.participants.size()) return std::nullopt;
    const auto who = up_now(setup_.participants[slot]);
    if (!who || (kind == FaultKind::kill_mid_eviction && who->generation != ask->owner_generation)) return std::nullopt;
    const std::string what = std::string(fault_name(kind)) + " " + who->name;
    say(what + " (pid " + std::to_string(who->pid) + ", generation " + std::to_string(who->generation) + ")");
    if (!hit(*who, SIGKILL, true)) return std::nullopt;
    await_replacement(*who, what);
    return fault_name(kind);
}

std::optional<std::string> Soak::stop(FaultKind kind) {
    const auto& targets = setup_.demo_participants;
    const auto who = wait_up(targets[plan_.pick(targets.size())]);
    if (!who) return std::nullopt;
    const auto length = plan_.stop_length(kind, kHeartbeatTimeout);
    const std::string what = std::string(fault_name(kind)) + " " + who->name + " for " + std::to_string(length.count()) + " ms";
    say(what + " (pid " + std::to_string(who->pid) + ", generation " + std::to_string(who->generation) + ")");
    if (!hit(*who, SIGSTOP, false)) return std::nullopt;
    std::this_thread::sleep_for(length);
    hit(*who, SIGCONT, false);  // false when the supervisor has ended it meanwhile
    if (kind == FaultKind::stop_long) {
        await_replacement(*who, what + ", past the heartbeat time-out of " + std::to_string(kHeartbeatTimeout.count()) + " ms");
        return fault_name(kind);
    }
    // Inside the time-out it should live on; a loaded machine may make it look hung, and
    // then its replacement must come.
    wait_until([&] { return up_now(who->name).has_value(); }, kRecoveryTimeout);
    const auto after = up_now(who->name);
    if (after && after->generation == who->generation) return fault_name(kind);
    await_replacement(*who, what);
    return std::string(fault_name(kind)) + " (replaced)";
}

std::optional<std::string> Soak::provoke_hostile() {
    const HostileMode& mode = kHostileModes[plan_.pick(std::size(kHostileModes))];
    const auto who = wait_up(hostile_pack(mode));
    if (!who) return std::nullopt;
    const std::string what = std::string("hostile ") + mode.mode;
    say(what + " (pid " + std::to_string(who->pid) + ", generation " + std::to_string(who->generation) + ")");
    const std::size_t from = life().run->log().lines().size();
    if (!hit(*who, SIGUSR1, true)) return std::nullopt;
    if (mode.escapes) return provoke_escape(*who, what, from);
    const bool answered = watch_log(
        from,
        [&](const std::string& raw) {
            const auto line = parse_log_line(raw);
            return line && says_outcome(line->text, who->name, who->pid, mode.outcome);
        },
        kOutcomeTimeout);
    if (!answered && !supervisor_gone()) {
        breach(who->name + " (pid " + std::to_string(who->pid) + ") did its misdeed, but the log did not say \"" +
               mode.outcome + "\" of it within " + std::to_string(kOutcomeTimeout.count()) + " s");
    }
    await_replacement(*who, what);
    return what;
}

std::string Soak::provoke_escape(const Participant& who, const std::string& what, std::size_t from) {
    std::optional<Escaped> escaped;
    watch_log(
        from,
        [&](const std::string& raw) {
            const auto line = parse_child_line(raw);
            if (line) escaped = parse_escaped(*line, who.name);
            return escaped.has_value();
        },
        kOutcomeTimeout);
    if (!escaped) {
        if (!supervisor_gone()) {
            breach(who.name + " (pid " + std::to_string(who.pid) + ") did not say what it started within " +
                   std::to_string(kOutcomeTimeout.count()) + " s of its signal");
        }
        return what;
    }
    say(who.name + " started " + std::to_string(escaped->setsid_child) + " (setsid) and " +
        std::to_string(escaped->daemon) + " (daemon); killing its worker");
    if (hit(who, SIGKILL, true)) await_replacement(who, what);
    const auto alive = [&] { return is_live(escaped->setsid_child) || is_live(escaped->daemon); };
    if (!wait_until([&] { return !alive(); }, kEscapedTimeout) && alive() && !supervisor_gone()) {
        breach(who.name + "'s processes " + std::to_string(escaped->setsid_child) + " and " +
               std::to_string(escaped->daemon) + ", started outside its worker's process group, outlived the worker (pid " +
               std::to_string(who.pid) + ") by " + std::to_string(kEscapedTimeout.count()) + " s; killing them to go on");
        ::kill(escaped->setsid_child, SIGKILL);
        ::kill(escaped->daemon, SIGKILL);
    }
    return what;
}

std::optional<std::string> Soak::provoke_hostile_call() {
    const HostileCall& call = kHostileCalls[plan_.pick(std::size(kHostileCalls))];
    const auto who = wait_up(call.pack);
    const auto host = wait_up("host");
    if (!who || !host) return std::nullopt;
    const std::string what = std::string("hostile-call ") + call.what;
    say(what + " (pack " + who->name + " pid " + std::to_string(who->pid) + ", generation " +
        std::to_string(who->generation) + "; host pid " + std::to_string(host->pid) + ")");
    const std::size_t from = life().run->log().lines().size();
    if (call.outcome != nullptr) {
        // The supervisor ends the pack's life on the host's word: its death is this fault's.
        life().targeted.insert(who->pid);
        life().must_die.insert(who->pid);
    }
    if (!hit(*host, call.signal, false)) return std::nullopt;
    const std::string verdict_line = std::string("host: host_participant: hostile calls: ") + call.what + " ";
    const std::string host_line = std::string("host: ") + (call.host_says != nullptr ? call.host_says : "");
    bool ended = call.outcome == nullptr;
    bool host_said = call.host_says == nullptr;
    std::optional<std::string> verdict;
    watch_log(
        from,
        [&](const std::string& raw) {
            if (const auto line = parse_log_line(raw)) {
                ended = ended || says_outcome(line->text, who->name, who->pid, call.outcome);
            } else if (const auto child = parse_child_line(raw)) {
                if (child->rfind(verdict_line, 0) == 0) verdict = child->substr(verdict_line.size());
                host_said = host_said || child->rfind(host_line, 0) == 0;
            }
            return ended && host_said && verdict;
        },
        kOutcomeTimeout);
    if (supervisor_gone()) return what;
    if (!ended) {
        breach(who->name + " (pid " + std::to_string(who->pid) + "): the log did not say \"" + call.outcome +
               "\" of it within " + std::to_string(kOutcomeTimeout.count()) + " s of the host's " + what);
    }
    if (!host_said) {
        breach("the host did not say \"" + std::string(call.host_says) + "...\" within " +
               std::to_string(kOutcomeTimeout.count()) + " s of its " + what);
    }
    if (verdict != "passed") {
        breach("the host's " + what + " " + (verdict ? *verdict : "said nothing within " + std::to_string(kOutcomeTimeout.count()) + " s"));
    }
    if (call.outcome != nullptr) await_replacement(*who, what);
    return what;
}

std::optional<std::string> Soak::kill_supervisor() {
    Life& dying = life();
    sample(dying.figures, false);
    const pid_t pid = dying.run->pid();
    say("kill-supervisor (pid " + std::to_string(pid) + ")");
    ending_ = true;
    dying.run->signal(SIGKILL);
    dying.run->wait(seconds(10));
    dying.figures.ended_by = "SIGKILL";
    // Every participant dies with it (PR_SET_PDEATHSIG), orphaned to us, and is reaped here.
    std::vector<InstanceProcess> survivors;
    wait_until(
        [&] {
            reap_exited_children();
            return (survivors = instance_processes(instance_)).empty();
        },
        seconds(5));
    if (!survivors.empty()) {
        breach("after SIGKILL of supervisor pid " + std::to_string(pid) + ", " + survivors.front().describe() +
               (survivors.size() > 1 ? " and " + std::to_string(survivors.size() - 1) + " more" : std::string()) +
               " of its processes lived on: PR_SET_PDEATHSIG did not reach them; killing them to go on");
        for (const auto& survivor : survivors) ::kill(survivor.pid, SIGKILL);
    }
    const bool stale = !shm_entries(instance_).empty();
    check_life(dying, true);
    const unsigned removed_before = report_.stale_segments_removed;
    ending_ = false;
    if (!start_life()) return "kill-supervisor";
    // The new supervisor must have removed its predecessor's segment to create its own.
    for (const auto& raw : life().run->log().lines()) {
        const auto line = parse_log_line(raw);
        if (line && is_stale_segment_removed(line->text)) ++report_.stale_segments_removed;
    }
    if (stale && report_.stale_segments_removed == removed_before) {
        breach("supervisor " + std::to_string(life().run->life()) + " started on instance " + instance_ +
               " without removing its killed predecessor's stale segment");
    }
    return "kill-supervisor";
}

}  // namespace comfy::soak
