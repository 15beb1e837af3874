#include "supervisor/lifecycle/process_spawner.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

namespace comfy::supervisor {

namespace {

// In the child between clone and exec only async-signal-safe calls are allowed, and it
// shares the supervisor's memory: report the step and errno through the pipe and leave.
[[noreturn]] void child_fail(int report_fd, StartFailure::Step step = StartFailure::Step::setup) {
    const StartFailure failure{step, errno};
    [[maybe_unused]] const auto n = ::write(report_fd, &failure, sizeof failure);
    ::_exit(127);
}

// What the child needs, all built before the clone.
struct ChildPlan {
    const SpawnRequest* request;
    char** argv;
    char** envp;
    int report_fd;
    int unused_report_fd;
    pid_t parent;
    const int* kept;  // the inherited descriptors and report_fd, ascending
    int kept_count;
};

// rt_sigaction's argument as the kernel takes it: the handler first, then flags, a restorer
// where the architecture has one, and the mask, all left zero (with SIG_DFL, a reset).
struct KernelSigaction {
    void (*handler)(int);
    unsigned long rest[4];
};
constexpr unsigned long kKernelSigsetBytes = 8;

int child_main(void* plan_pointer) {
    const ChildPlan& plan = *static_cast<const ChildPlan*>(plan_pointer);
    ::close(plan.unused_report_fd);
    // The supervisor's handlers must not run here, in its memory, before exec: back to the
    // defaults (this child's own table; CLONE_SIGHAND is not shared) while all are blocked.
    // Through the system call itself, not libc's sigaction, which a library may wrap:
    // ThreadSanitizer's wrapper keeps the handlers in a table of its own, in the memory
    // shared with the supervisor, so a reset through it took the supervisor's SIGTERM
    // handler away. Signals 32 and 33 are glibc's own, which its sigaction refuses to
    // change; they are left alone as before.
    for (int signal = 1; signal < NSIG; ++signal) {
        if (signal >= 32 && signal < SIGRTMIN) continue;
        KernelSigaction action{};
        if (::syscall(SYS_rt_sigaction, signal, nullptr, &action, kKernelSigsetBytes) != 0) continue;
        if (action.handler == SIG_DFL || action.handler == SIG_IGN) continue;
        const KernelSigaction reset{};  // SIG_DFL
        ::syscall(SYS_rt_sigaction, signal, &reset, nullptr, kKernelSigsetBytes);
    }
    if (::setpgid(0, 0) != 0) child_fail(plan.report_fd);
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail(plan.report_fd);
    // The subreaper of its own tree (kept across exec): what it starts stays below it
    // even after a double fork or setsid(), and comes to the supervisor, a subreaper too,
    // when it ends, to be ended then (strays.hpp).
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) child_fail(plan.report_fd);
    if (::getppid() != plan.parent) ::_exit(127);  // the parent died before prctl took hold
    sigset_t all;
    sigemptyset(&all);
    ::sigprocmask(SIG_SETMASK, &all, nullptr);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd < 0 || ::dup2(null_fd, STDIN_FILENO) < 0) child_fail(plan.report_fd);
    const SpawnRequest& request = *plan.request;
    if (request.output_fd >= 0) {
        if (::dup2(request.output_fd, STDOUT_FILENO) < 0 || ::dup2(request.output_fd, STDERR_FILENO) < 0) {
            child_fail(plan.report_fd);
        }
    }
    // Close everything above stderr but the inherited descriptors (sorted before the
    // clone) and the report pipe, which closes itself at exec.
    unsigned next = STDERR_FILENO + 1;
    auto close_below = [&](int fd) {
        const auto upto = static_cast<unsigned>(fd);
        if (upto > next) ::syscall(SYS_close_range, next, upto - 1, 0);
        if (upto + 1 > next) next = upto + 1;
    };
    for (int i = 0; i < plan.kept_count; ++i) close_below(plan.kept[i]);
    ::syscall(SYS_close_range, next, ~0u, 0);
    for (const int fd : request.inherited_fds) {
        if (::fcntl(fd, F_SETFD, 0) != 0) child_fail(plan.report_fd);
    }
    if (::chdir(request.working_directory.c_str()) != 0) {
        child_fail(plan.report_fd, StartFailure::Step::working_directory);
    }
    ::execve(plan.argv[0], plan.argv, plan.envp);
    child_fail(plan.report_fd, StartFailure::Step::exec);
}

// The child's stack while it runs in the supervisor's memory; it needs little (no
// allocation, a handful of system calls).
constexpr std::size_t kChildStack = 64 * 1024;

}  // namespace

SpawnedProcess spawn_process(const SpawnRequest& request) {
    // Everything the child needs is built before the clone.
    std::vector<std::string> env_strings;
    for (const auto& [key, value] : request.environment) env_strings.push_back(key + "=" + value);
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> arg_strings{request.command};
    arg_strings.insert(arg_strings.end(), request.args.begin(), request.args.end());
    std::vector<char*> argv;
    for (auto& s : arg_strings) argv.push_back(s.data());
    argv.push_back(nullptr);

    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
    // The child shares our memory until it execs (CLONE_VM, and CLONE_VFORK suspends us
    // until then), as posix_spawn does: a fork would copy the supervisor's page tables and
    // descriptor table for every worker, and each page we touched before the child's exec
    // would be copied again, a cost that grew with the number of workers already running.
    std::vector<int> kept = request.inherited_fds;
    kept.push_back(report[1]);
    std::sort(kept.begin(), kept.end());
    ChildPlan plan{&request, argv.data(), envp.data(), report[1], report[0], ::getpid(), kept.data(),
                   static_cast<int>(kept.size())};
    std::vector<char> stack(kChildStack);
    // Every signal blocked across the clone, so that none reaches the child before it has
    // set its handlers back to the defaults.
    sigset_t all;
    sigset_t previous;
    sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &previous);
    const pid_t pid = ::clone(child_main, stack.data() + stack.size(), CLONE_VM | CLONE_VFORK | SIGCHLD,
                              &plan);
    const int clone_error = errno;
    ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    if (pid < 0) {
        ::close(report[0]);
        ::close(report[1]);
        throw std::system_error(clone_error, std::generic_category(), "clone");
    }
    ::close(report[1]);
    // Also set in the parent, so the group exists before anyone signals it.
    ::setpgid(pid, pid);
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pidfd < 0) {
        const int err = errno;
        ::kill(pid, SIGKILL);
        ::close(report[0]);
        throw std::system_error(err, std::generic_category(), "pidfd_open (needs Linux 5.3 or later)");
    }
    return SpawnedProcess{pid, pidfd, report[0]};
}

StartFailure take_start_failure(SpawnedProcess& process) {
    StartFailure failure;
    if (process.exec_error_fd < 0) return failure;
    if (::read(process.exec_error_fd, &failure, sizeof failure) != static_cast<ssize_t>(sizeof failure)) failure = {};
    ::close(process.exec_error_fd);
    process.exec_error_fd = -1;
    return failure;
}

}  // namespace comfy::supervisor
