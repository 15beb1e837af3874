#pragma once
// Runs a function in a forked child process, for real multi-process tests. The child
// exits with the function's return value (or 99 on an exception) without running the
// parent's destructors; the parent always reaps it, also when a test fails early.

#include <sys/types.h>

#include <functional>

namespace comfy::test {

class ChildProcess {
public:
    explicit ChildProcess(const std::function<int()>& body);
    ~ChildProcess();  // kills and reaps a child that was not waited for
    ChildProcess(const ChildProcess&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;

    pid_t pid() const noexcept { return pid_; }
    // Waits for the child; its exit code, or 128 + signal when a signal ended it.
    int wait();
    void kill(int signal) const;

private:
    pid_t pid_ = -1;
    bool reaped_ = false;
};

}  // namespace comfy::test
