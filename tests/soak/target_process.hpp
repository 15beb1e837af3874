#pragma once
// A participant's process as the soak signals it: held by a pidfd, so that no signal ever
// reaches a process that took over its pid, and checked to be the supervisor's child when
// the pidfd was opened.

#include <sys/types.h>

#include <optional>

namespace comfy::soak {

class TargetProcess {
public:
    // Nothing when `pid` is gone or is not `supervisor`'s child (any more).
    static std::optional<TargetProcess> open(pid_t pid, pid_t supervisor);
    ~TargetProcess();
    TargetProcess(TargetProcess&& other) noexcept;
    TargetProcess& operator=(TargetProcess&&) = delete;
    TargetProcess(const TargetProcess&) = delete;
    TargetProcess& operator=(const TargetProcess&) = delete;

    pid_t pid() const noexcept { return pid_; }
    // False when the process has exited meanwhile.
    bool signal(int signal) const;

private:
    TargetProcess(pid_t pid, int pidfd) : pid_(pid), pidfd_(pidfd) {}
    pid_t pid_;
    int pidfd_;
};

}  // namespace comfy::soak
