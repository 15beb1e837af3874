#include "supervisor/process_spawner.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace comfy::supervisor {

namespace {

// In the child between fork and exec only async-signal-safe calls are allowed: report
// errno through the pipe and leave.
[[noreturn]] void child_fail(int report_fd) {
    const int err = errno;
    [[maybe_unused]] const auto n = ::write(report_fd, &err, sizeof err);
    ::_exit(127);
}

}  // namespace

SpawnedProcess spawn_process(const SpawnRequest& request) {
    // Everything the child needs is built before fork.
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
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
        const int err = errno;
        ::close(report[0]);
        ::close(report[1]);
        throw std::system_error(err, std::generic_category(), "fork");
    }
    if (pid == 0) {
        ::close(report[0]);
        if (::setpgid(0, 0) != 0) child_fail(report[1]);
        if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail(report[1]);
        if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took hold
        sigset_t all;
        sigemptyset(&all);
        ::sigprocmask(SIG_SETMASK, &all, nullptr);
        const int null_fd = ::open("/dev/null", O_RDONLY);
        if (null_fd < 0 || ::dup2(null_fd, STDIN_FILENO) < 0) child_fail(report[1]);
        if (request.inherited_fd >= 0 && ::fcntl(request.inherited_fd, F_SETFD, 0) != 0) child_fail(report[1]);
        if (::chdir(request.working_directory.c_str()) != 0) child_fail(report[1]);
        ::execve(argv[0], argv.data(), envp.data());
        child_fail(report[1]);
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

int take_exec_error(SpawnedProcess& process) {
    int err = 0;
    if (process.exec_error_fd < 0) return 0;
    if (::read(process.exec_error_fd, &err, sizeof err) != static_cast<ssize_t>(sizeof err)) err = 0;
    ::close(process.exec_error_fd);
    process.exec_error_fd = -1;
    return err;
}

}  // namespace comfy::supervisor
