#pragma once
// One life of comfy-supervisor under the soak: `run` with the soak's config and workload
// on the soak's instance, its stdout and stderr each in a file of its own, read as they
// grow. The soak is its parent and reaps it.

#include "tests/soak/soak_setup.hpp"

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace comfy::soak {

using Clock = std::chrono::steady_clock;

// A file another process appends to, read in whole lines as they come.
class GrowingFile {
public:
    explicit GrowingFile(std::filesystem::path path) : path_(std::move(path)) {}
    // Reads what was appended since the last call; the lines so far.
    const std::vector<std::string>& lines();
    const std::filesystem::path& path() const noexcept { return path_; }

private:
    std::filesystem::path path_;
    std::uint64_t offset_ = 0;
    std::string partial_;
    std::vector<std::string> lines_;
};

class SupervisorRun {
public:
    // Starts it; `life` numbers the files (life-1.log, life-1.out). Throws
    // std::runtime_error when it cannot be started.
    SupervisorRun(const SoakSetup& setup, const std::string& instance, const std::filesystem::path& folder, int life);
    ~SupervisorRun();  // SIGKILL and reap, if it still runs
    SupervisorRun(const SupervisorRun&) = delete;
    SupervisorRun& operator=(const SupervisorRun&) = delete;

    pid_t pid() const noexcept { return pid_; }
    int life() const noexcept { return life_; }
    Clock::time_point started_at() const noexcept { return started_at_; }
    // Seconds since it started, on the clock its log lines use (near enough).
    double seconds_at(Clock::time_point when) const;

    GrowingFile& log() noexcept { return log_; }        // its stderr, with its workers'
    GrowingFile& output() noexcept { return output_; }  // its stdout: progress and summary

    void signal(int signal) const;
    // Its exit status (the code, or 128 + the signal), once it has exited and been reaped.
    std::optional<int> poll_exit();
    // Polls until it exits, up to `timeout`.
    std::optional<int> wait(std::chrono::milliseconds timeout);

private:
    int life_;
    pid_t pid_ = -1;
    std::optional<int> status_;
    Clock::time_point started_at_;
    GrowingFile log_;
    GrowingFile output_;
};

}  // namespace comfy::soak
