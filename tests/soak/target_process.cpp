#include "tests/soak/target_process.hpp"

#include "tests/soak/process_probe.hpp"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace comfy::soak {

std::optional<TargetProcess> TargetProcess::open(pid_t pid, pid_t supervisor) {
    if (pid <= 0) return std::nullopt;
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pidfd < 0) return std::nullopt;
    // Checked after the pidfd is open: from here on it names this process, whatever its pid does.
    TargetProcess process(pid, pidfd);
    if (parent_of(pid) != supervisor) return std::nullopt;
    return process;
}

TargetProcess::TargetProcess(TargetProcess&& other) noexcept : pid_(other.pid_), pidfd_(other.pidfd_) {
    other.pidfd_ = -1;
}

TargetProcess::~TargetProcess() {
    if (pidfd_ >= 0) ::close(pidfd_);
}

bool TargetProcess::signal(int signal) const {
    return ::syscall(SYS_pidfd_send_signal, pidfd_, signal, nullptr, 0) == 0;
}

}  // namespace comfy::soak
