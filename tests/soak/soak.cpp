#include "tests/soak/soak.hpp"

#include "tests/soak/ledger_check.hpp"
#include "tests/soak/process_probe.hpp"
#include "tests/soak/summary_reader.hpp"
#include "tests/soak/supervisor_log.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <limits>
#include <thread>

namespace comfy::soak {

namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr milliseconds kPoll{10};
constexpr seconds kStartTimeout{60};  // Python's start, on a loaded machine
constexpr seconds kUpTimeout{30};
constexpr seconds kStopTimeout{30};
constexpr std::uint64_t kRssGrowthLimitKib = 20 * 1024;
// A prompt that fails this close to a fault (before it, or after its recovery) is the
// fault's doing: its node may have been waiting on the faulted participant.
constexpr double kFaultReachBefore = 1.0;
constexpr double kFaultReachAfter = 5.0;

// Lock-free, so a signal handler may set it.
std::atomic<bool> stop_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free);

std::string joined(const std::vector<std::string>& lines) {
    std::string text;
    for (const auto& line : lines) text += (text.empty() ? "" : ", ") + line;
    return text;
}

}  // namespace

void request_stop() noexcept {
    // Relaxed: a flag polled between faults, guarding nothing else.
    stop_requested.store(true, std::memory_order_relaxed);
}

Soak::Soak(const SoakOptions& options, std::uint64_t seed)
    : options_(options),
      plan_(seed, seconds(options.seconds)),
      instance_("soak-" + std::to_string(::getpid())),
      folder_(std::filesystem::temp_directory_path() / ("comfy-" + instance_)) {
    report_.seed = seed;
    report_.seconds = options.seconds;
    std::filesystem::create_directories(folder_);
    setup_ = write_soak_setup(folder_);
}

Soak::~Soak() {
    lives_.clear();  // any supervisor still running is killed and reaped first
    if (report_.logs.empty()) {
        std::error_code ignored;
        std::filesystem::remove_all(folder_, ignored);
    }
}

SoakReport Soak::run() {
    say("seed " + std::to_string(report_.seed) + " (repeat with --seed " + std::to_string(report_.seed) + "), " +
        std::to_string(options_.seconds) + " s, instance " + instance_);
    // The supervisor's workers are orphaned when it is killed: they come to us, to reap.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    began_ = Clock::now();
    const auto end = began_ + seconds(options_.seconds);
    if (start_life()) {
        // Relaxed: see request_stop().
        while (!supervisor_gone() && !abandoned_ && !stop_requested.load(std::memory_order_relaxed)) {
            const auto pause = plan_.pause();
            if (Clock::now() + pause >= end) break;
            std::this_thread::sleep_for(pause);
            const FaultKind kind = plan_.next(Clock::now() - began_);
            const auto at = Clock::now();
            const auto name = inject(kind);
            if (!name) {
                ++report_.skipped[fault_name(kind)];
                continue;
            }
            ++report_.faults[*name];
            if (kind != FaultKind::kill_supervisor) {
                life().faulted.emplace_back(life().run->seconds_at(at), life().run->seconds_at(Clock::now()));
            }
            check_ledger(*name);
        }
    }
    end_life();
    check_leftovers();
    report_.elapsed = elapsed();
    for (const auto& stall : stall_watch_.stalls()) {
        ++report_.stalls;
        report_.longest_stall = std::max(report_.longest_stall, std::chrono::duration<double>(stall.to - stall.from).count());
    }
    if (!report_.breaches.empty() || options_.keep_logs) report_.logs = folder_.string();
    return report_;
}

// ---- lives ----

bool Soak::start_life() {
    lives_.emplace_back();
    Life& current = life();
    current.run = std::make_unique<SupervisorRun>(setup_, instance_, folder_, static_cast<int>(lives_.size()));
    current.figures.life = current.run->life();
    auto& log = current.run->log();
    const bool started = wait_until(
        [&] {
            const auto& lines = log.lines();
            return std::any_of(lines.begin(), lines.end(), [](const std::string& line) {
                return line.find("every worker is up") != std::string::npos;
            });
        },
        kStartTimeout);
    if (!started) {
        abandoned_ = true;
        breach("supervisor " + std::to_string(current.run->life()) + " (pid " + std::to_string(current.run->pid()) +
               "): not every participant was up within " + std::to_string(kStartTimeout.count()) + " s; see " +
               log.path().string());
        return false;
    }
    say("supervisor " + std::to_string(current.run->life()) + " (pid " + std::to_string(current.run->pid()) +
        ") is up with every participant");
    sample(current.figures, true);
    return true;
}

void Soak::end_life() {
    if (lives_.empty()) return;
    Life& current = life();
    ending_ = true;
    if (!current.run->poll_exit()) {
        sample(current.figures, false);
        current.run->signal(SIGTERM);
    }
    const auto status = current.run->wait(kStopTimeout);
    current.figures.ended_by = "SIGTERM";
    if (!status) {
        breach("supervisor " + std::to_string(current.run->life()) + " (pid " + std::to_string(current.run->pid()) +
               ") did not exit within " + std::to_string(kStopTimeout.count()) + " s of SIGTERM; killing it");
        current.run->signal(SIGKILL);
        current.run->wait(kStopTimeout);
    }
    check_life(current, false);
    if (status) check_summary(current, *status);
}

bool Soak::supervisor_gone() {
    if (ending_ || lives_.empty() || !life().run->poll_exit()) return false;
    if (!gone_reported_) {
        gone_reported_ = true;
        breach("supervisor " + std::to_string(life().run->life()) + " (pid " + std::to_string(life().run->pid()) +
               ") exited by itself with status " + std::to_string(*life().run->poll_exit()) + "; see " +
               life().run->log().path().string());
    }
    return true;
}

void Soak::check_life(Life& current, bool killed) {
    auto& figures = current.figures;
    figures.seconds = current.run->seconds_at(Clock::now());
    const std::string who = "supervisor " + std::to_string(current.run->life());
    if (figures.rss_start_kib && figures.rss_end_kib && *figures.rss_end_kib > *figures.rss_start_kib + kRssGrowthLimitKib) {
        breach(who + ": its resident set grew from " + std::to_string(*figures.rss_start_kib) + " to " +
               std::to_string(*figures.rss_end_kib) + " KiB, more than the " + std::to_string(kRssGrowthLimitKib) +
               " KiB allowed");
    }
    if (figures.fds_start && figures.fds_end && *figures.fds_start != *figures.fds_end) {
        breach(who + ": it had " + std::to_string(*figures.fds_start) + " descriptors open with every participant up at "
               "its start and " + std::to_string(*figures.fds_end) + " at its end");
    }
    check_log(current);
    if (killed) {
        // No summary: the prompts before the last one started were done or failed.
        const auto& output = current.run->output().lines();
        const std::uint32_t started = prompts_started(output);
        std::set<std::uint32_t> failed;
        for (const auto& raw : current.run->log().lines()) {
            const auto line = parse_log_line(raw);
            const auto failure = line ? parse_prompt_failure(line->text) : std::nullopt;
            if (failure && failure->prompt < started) failed.insert(failure->prompt);
        }
        if (started > 0) report_.prompts_done_uncounted += started - 1 - static_cast<std::uint32_t>(failed.size());
    }
    report_.lives.push_back(figures);
}

void Soak::check_log(Life& current) {
    const std::string who = "supervisor " + std::to_string(current.run->life());
    const auto& lines = current.run->log().lines();
    double shutdown_at = std::numeric_limits<double>::infinity();
    const std::string deaf = kDeafPack;
    const auto deaf_slot = static_cast<std::uint32_t>(
        std::find(setup_.participants.begin(), setup_.participants.end(), deaf) - setup_.participants.begin());
    std::set<pid_t> reported_dead;
    for (const auto& raw : lines) {
        const auto line = parse_log_line(raw);
        if (!line) continue;
        if (is_shutdown_start(line->text)) shutdown_at = std::min(shutdown_at, line->seconds);
        if (parse_passed_over(line->text) == deaf_slot) ++report_.deaf_passed_over;
        const bool faulted = std::any_of(current.faulted.begin(), current.faulted.end(), [&](const auto& window) {
            return line->seconds >= window.first - kFaultReachBefore && line->seconds <= window.second + kFaultReachAfter;
        });
        if (const auto death = parse_death(line->text)) {
            reported_dead.insert(death->pid);
            // The deaf pack may be stopped by the supervisor for what it does not read.
            const bool stopped_deaf = death->name == deaf && death->how.find(" (") != std::string::npos;
            const bool explained = current.targeted.count(death->pid) || line->seconds >= shutdown_at || stopped_deaf;
            if (!explained && is_timing_verdict(death->how) &&
                stalled(current, line->seconds - 2 * kHeartbeatTimeout.count() / 1000.0, line->seconds)) {
                ++report_.stall_deaths;
            } else if (!explained) {
                breach(who + ": a death no fault explains, at " + std::to_string(line->seconds) + " s: " + line->text);
            }
        }
        if (const auto failure = parse_prompt_failure(line->text)) {
            ++report_.prompts_failed;
            ++current.failures_logged;
            if (line->seconds >= shutdown_at && failure->why == "the supervisor is shutting down") {
                ++report_.prompts_failed_at_shutdown;
            } else if (!faulted && !stalled(current, line->seconds - kFaultReachAfter, line->seconds + kFaultReachBefore)) {
                breach(who + ": prompt " + std::to_string(failure->prompt) + " failed at " +
                       std::to_string(line->seconds) + " s with no fault in effect: " + line->text);
            }
        }
    }
    for (const pid_t pid : current.must_die) {
        if (!reported_dead.count(pid)) {
            breach(who + ": the soak killed pid " + std::to_string(pid) + " but the log has no death line for it; "
                   "fix the soak's reading of the log (tests/soak/supervisor_log.cpp) if its wording changed");
        }
    }
}

void Soak::check_summary(Life& current, int status) {
    const std::string who = "supervisor " + std::to_string(current.run->life());
    const auto& output = current.run->output().lines();
    const auto summary = read_summary(output);
    if (status != 0 && status != 1) breach(who + " exited with status " + std::to_string(status) + " after SIGTERM");
    if (!summary) {
        breach(who + " printed no summary after SIGTERM; see " + current.run->output().path().string());
        return;
    }
    const std::uint32_t started = prompts_started(output);
    if (summary->prompts_run + summary->prompts_failed != started) {
        breach(who + ": " + std::to_string(started) + " prompts started, but " + std::to_string(summary->prompts_run) +
               " done and " + std::to_string(summary->prompts_failed) + " failed");
    }
    if (summary->prompts_failed != current.failures_logged) {
        breach(who + ": its summary counts " + std::to_string(summary->prompts_failed) + " failed prompts, its log " +
               std::to_string(current.failures_logged) + " lines that fail one");
    }
    report_.prompts_done += summary->prompts_run;
    report_.admissions_asked += summary->admissions;
    report_.admissions_answered += summary->granted + summary->refused;
    report_.admissions_withdrawn += summary->withdrawn;
    if (summary->admissions != summary->granted + summary->refused + summary->withdrawn || summary->unanswered != 0) {
        breach(who + ": " + std::to_string(summary->admissions) + " admissions asked, " +
               std::to_string(summary->granted) + " granted, " + std::to_string(summary->refused) + " refused, " +
               std::to_string(summary->withdrawn) + " withdrawn with their asker, " +
               std::to_string(summary->unanswered) + " unanswered at the end");
    }
}

bool Soak::stalled(const Life& current, double from, double to) const {
    const auto stalls = stall_watch_.stalls();
    return std::any_of(stalls.begin(), stalls.end(), [&](const StallWatch::Stall& stall) {
        return current.run->seconds_at(stall.from) <= to && current.run->seconds_at(stall.to) >= from;
    });
}

void Soak::sample(LifeFigures& figures, bool at_start) {
    const pid_t pid = life().run->pid();
    // Compared with every participant up, so that no restart's descriptors are counted.
    if (!wait_until([&] { return all_up(); }, kUpTimeout)) {
        breach("supervisor " + std::to_string(figures.life) + ": not every participant was up within " +
               std::to_string(kUpTimeout.count()) + " s to measure it");
        return;
    }
    auto& rss = at_start ? figures.rss_start_kib : figures.rss_end_kib;
    auto& fds = at_start ? figures.fds_start : figures.fds_end;
    rss = resident_kib(pid);
    fds = open_descriptors(pid);
    // A descriptor opened for a moment (a restart's, a reader's) is not a leak: look again.
    if (!at_start) wait_until([&] { return (fds = open_descriptors(pid)) == figures.fds_start; }, seconds(2));
}

void Soak::check_leftovers() {
    reap_exited_children();
    std::vector<InstanceProcess> processes;
    wait_until([&] { return (processes = instance_processes(instance_)).empty(); }, seconds(5));
    for (const auto& process : processes) {
        report_.leftovers.push_back("process " + process.describe());
        breach("process " + process.describe() + " of instance " + instance_ + " outlived the soak's supervisors; "
               "killing it");
        ::kill(process.pid, SIGKILL);
    }
    for (const auto& entry : shm_entries(instance_)) {
        report_.leftovers.push_back(entry);
        breach(entry + " was left behind; removing it");
        std::error_code ignored;
        std::filesystem::remove(entry, ignored);
    }
}

// ---- waiting and reading ----

bool Soak::wait_until(const std::function<bool()>& condition, milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
        if (condition()) return true;
        if (Clock::now() >= deadline || supervisor_gone()) return false;
        std::this_thread::sleep_for(kPoll);
    }
}

bool Soak::watch_log(std::size_t from, const std::function<bool(const std::string& raw)>& take, milliseconds timeout) {
    auto& log = life().run->log();
    return wait_until(
        [&] {
            for (const auto& lines = log.lines(); from < lines.size();) {
                if (take(lines[from++])) return true;
            }
            return false;
        },
        timeout);
}

std::optional<Soak::Participant> Soak::up_in(const ctl::SegmentReport& report, const std::string& name) {
    for (const auto& row : report.workers) {
        if (!row.busy && row.name == name && (row.state == "ready" || row.state == "busy") && row.pid > 0) {
            return Participant{name, row.pid, row.generation};
        }
    }
    return std::nullopt;
}

std::optional<Soak::Participant> Soak::up_now(const std::string& name) {
    const auto report = read_instance(instance_);
    return report ? up_in(*report, name) : std::nullopt;
}

std::optional<Soak::Participant> Soak::wait_up(const std::string& name) {
    std::optional<Participant> found;
    if (!wait_until([&] { return (found = up_now(name)).has_value(); }, kUpTimeout) && !supervisor_gone()) {
        breach(name + " was not up within " + std::to_string(kUpTimeout.count()) + " s");
    }
    return found;
}

bool Soak::all_up() {
    const auto report = read_instance(instance_);
    return report && std::all_of(setup_.participants.begin(), setup_.participants.end(),
                                 [&](const std::string& name) { return up_in(*report, name).has_value(); });
}

void Soak::check_ledger(const std::string& after) {
    ++report_.ledger_checks;
    std::vector<std::string> disagreements{"the segment could not be read"};
    const bool agreed = wait_until(
        [&] {
            const auto report = read_instance(instance_);
            if (!report) return false;
            disagreements = ledger_disagreements(*report);
            return disagreements.empty();
        },
        seconds(10));
    if (agreed) {
        ++report_.ledger_checks_passed;
    } else if (!supervisor_gone()) {
        breach("the ledger disagreed with its owners for 10 s after " + after + ": " + joined(disagreements));
    }
}

void Soak::breach(const std::string& line) {
    report_.breaches.push_back(line);
    say("BREACH: " + line);
}

void Soak::say(const std::string& line) const {
    std::fprintf(stderr, "soak [%7.1f] %s\n", elapsed(), line.c_str());
}

double Soak::elapsed() const { return std::chrono::duration<double>(Clock::now() - began_).count(); }

}  // namespace comfy::soak
