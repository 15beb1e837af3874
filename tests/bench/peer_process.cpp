#include "tests/bench/peer_process.hpp"

#include "tests/bench/bench_error.hpp"

#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace comfy::bench {

namespace {

// What the SIGCHLD handler needs: the peer it watches (0: none) and the line it prints
// when that peer dies before finishing. Written before the pid is published.
std::atomic<pid_t> watched_peer{0};
static_assert(std::atomic<pid_t>::is_always_lock_free, "a signal handler reads it");
std::array<char, 512> early_exit_line{};
std::size_t early_exit_line_length = 0;

// Async-signal-safe: only waitid, waitpid, write and _exit.
void on_sigchld(int) {
    const int saved_errno = errno;
    // Acquire: pairs with the release store in PeerProcess, so the line is complete.
    const pid_t peer = watched_peer.load(std::memory_order_acquire);
    siginfo_t info{};
    // WNOWAIT: only look; a peer that finished its work is reaped by join().
    if (peer > 0 && ::waitid(P_PID, static_cast<id_t>(peer), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == peer && !(info.si_code == CLD_EXITED && info.si_status == 0)) {
        ::waitpid(peer, nullptr, 0);
        [[maybe_unused]] const auto written = ::write(STDERR_FILENO, early_exit_line.data(), early_exit_line_length);
        ::_exit(1);
    }
    errno = saved_errno;
}

void prepare_early_exit_line(const std::string& measurement) {
    const int length = std::snprintf(early_exit_line.data(), early_exit_line.size(),
                                     "%s: the peer process of the %s measurement stopped early (its message, if "
                                     "any, is above); rerun, and report it if it repeats\n",
                                     program_invocation_short_name, measurement.c_str());
    // snprintf truncates a long line; the length it reports is the untruncated one.
    early_exit_line_length = length < 0 ? 0 : std::min(static_cast<std::size_t>(length), early_exit_line.size() - 1);
}

bool pin_calling_process(int cpu) noexcept {
    cpu_set_t only{};
    CPU_ZERO(&only);
    CPU_SET(static_cast<std::size_t>(cpu), &only);
    return ::sched_setaffinity(0, sizeof only, &only) == 0;
}

// Waits for `pid`, retrying when a signal interrupts the wait; false when it cannot.
bool reap(pid_t pid, int& status) noexcept {
    for (;;) {
        if (::waitpid(pid, &status, 0) == pid) return true;
        if (errno != EINTR) return false;
    }
}

std::string describe_exit(int status) {
    if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return std::string("was killed by signal ") + ::strsignal(WTERMSIG(status));
    return "ended with wait status " + std::to_string(status);
}

}  // namespace

CpuPlacement pin_initiator_and_choose_peer_cpu() {
    cpu_set_t allowed{};
    CPU_ZERO(&allowed);
    if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        return {{}, {}, std::string("not pinned: sched_getaffinity failed (") + std::strerror(errno) + ")"};
    }
    std::vector<int> cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE && cpus.size() < 2; ++cpu) {
        if (CPU_ISSET(static_cast<std::size_t>(cpu), &allowed)) cpus.push_back(cpu);
    }
    if (cpus.size() < 2) return {{}, {}, "not pinned: only one CPU is available, so both processes share it"};
    if (!pin_calling_process(cpus[0])) {
        throw_errno("pinning to CPU " + std::to_string(cpus[0]), "check the CPU set this runs in (taskset -p $$)");
    }
    return {cpus[0], cpus[1],
            "initiator pinned to CPU " + std::to_string(cpus[0]) + ", peer to CPU " + std::to_string(cpus[1])};
}

PeerProcess::PeerProcess(std::string_view measurement, const CpuPlacement& cpus) : measurement_(measurement) {
    prepare_early_exit_line(measurement_);
    // Block SIGCHLD until the handler knows the pid: a peer that dies at once is still caught.
    sigset_t sigchld{};
    ::sigemptyset(&sigchld);
    ::sigaddset(&sigchld, SIGCHLD);
    ::sigprocmask(SIG_BLOCK, &sigchld, &previous_signal_mask_);
    struct sigaction watchdog {};
    watchdog.sa_handler = on_sigchld;
    ::sigemptyset(&watchdog.sa_mask);
    // SA_RESTART: the blocking reads of the baselines resume after the peer's normal exit.
    watchdog.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    ::sigaction(SIGCHLD, &watchdog, &previous_sigchld_action_);

    const pid_t initiator = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
        become_peer(cpus, initiator);
        return;
    }
    if (pid_ < 0) {
        const int fork_error = errno;
        ::sigaction(SIGCHLD, &previous_sigchld_action_, nullptr);
        ::sigprocmask(SIG_SETMASK, &previous_signal_mask_, nullptr);
        errno = fork_error;
        throw_errno("fork of the peer process", "raise the process limit (ulimit -u) or free memory, then rerun");
    }
    // Release: the early-exit line is written before the handler can see the pid.
    watched_peer.store(pid_, std::memory_order_release);
    ::sigprocmask(SIG_SETMASK, &previous_signal_mask_, nullptr);  // a death meanwhile is delivered now
}

PeerProcess::~PeerProcess() {
    if (joined_) return;
    stop_watching();
    ::kill(pid_, SIGKILL);
    int status = 0;
    reap(pid_, status);
}

void PeerProcess::join() {
    stop_watching();
    joined_ = true;
    int status = 0;
    if (!reap(pid_, status)) throw_errno("waiting for the peer process", "report it");
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
    throw BenchError("the peer process of the " + measurement_ + " measurement " + describe_exit(status) +
                     " (its message, if any, is above); rerun, and report it if it repeats");
}

void PeerProcess::become_peer(const CpuPlacement& cpus, pid_t initiator) noexcept {
    // The watchdog belongs to the initiator: the peer gets the original action and mask back.
    ::sigaction(SIGCHLD, &previous_sigchld_action_, nullptr);
    ::sigprocmask(SIG_SETMASK, &previous_signal_mask_, nullptr);
    // Die with the initiator, so an interrupted benchmark leaves no spinning process behind.
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) exit_reporting("prctl(PR_SET_PDEATHSIG) failed");
    // The initiator died before prctl took effect: nobody is left to answer.
    if (::getppid() != initiator) ::_exit(1);
    if (cpus.peer_cpu && !pin_calling_process(*cpus.peer_cpu)) {
        exit_reporting("could not pin to its CPU; check the CPU set this runs in (taskset -p $$)");
    }
}

void PeerProcess::exit_reporting(const char* what) noexcept {
    // No measurement name here: the initiator's watchdog line that follows gives it.
    std::fprintf(stderr, "%s: peer process: %s\n", program_invocation_short_name, what);
    ::_exit(1);
}

void PeerProcess::stop_watching() noexcept {
    // Relaxed: the handler runs on this thread, and once it reads 0 it reads nothing else.
    watched_peer.store(0, std::memory_order_relaxed);
    ::sigaction(SIGCHLD, &previous_sigchld_action_, nullptr);
}

}  // namespace comfy::bench
