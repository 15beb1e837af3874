#include "tests/soak/supervisor_run.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace comfy::soak {

const std::vector<std::string>& GrowingFile::lines() {
    std::ifstream in(path_, std::ios::binary);
    if (!in) return lines_;
    in.seekg(static_cast<std::streamoff>(offset_));
    std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    offset_ += chunk.size();
    partial_ += chunk;
    std::size_t start = 0;
    for (std::size_t end; (end = partial_.find('\n', start)) != std::string::npos; start = end + 1) {
        lines_.push_back(partial_.substr(start, end - start));
    }
    partial_.erase(0, start);
    return lines_;
}

SupervisorRun::SupervisorRun(const SoakSetup& setup, const std::string& instance, const std::filesystem::path& folder,
                             int life)
    : life_(life),
      log_(folder / ("life-" + std::to_string(life) + ".log")),
      output_(folder / ("life-" + std::to_string(life) + ".out")) {
    const std::string binary = COMFY_SUPERVISOR_PATH;
    std::vector<std::string> args{binary,     "run",  "--config",      setup.config.string(), "--workload",
                                  setup.workload.string(), "--instance", instance};
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const int out = ::open(output_.path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const int err = ::open(log_.path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0 || err < 0) throw std::runtime_error("cannot create the logs in " + folder.string() + ": " + std::strerror(errno));
    const pid_t parent = ::getpid();
    started_at_ = Clock::now();
    pid_ = ::fork();
    if (pid_ == 0) {
        // Between fork and exec only async-signal-safe calls. If the soak dies, by a crash
        // or a CI time-out, the supervisor goes too, and its workers with it; a terminal's
        // Ctrl-C is the soak's alone to handle (a process group of its own).
        if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent || ::setpgid(0, 0) != 0) ::_exit(127);
        if (::dup2(out, STDOUT_FILENO) < 0 || ::dup2(err, STDERR_FILENO) < 0) ::_exit(127);
        ::execv(binary.c_str(), argv.data());
        ::_exit(127);
    }
    const int fork_error = errno;
    ::close(out);
    ::close(err);
    if (pid_ < 0) throw std::runtime_error("cannot start " + binary + ": fork: " + std::strerror(fork_error));
}

SupervisorRun::~SupervisorRun() {
    if (status_) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
}

double SupervisorRun::seconds_at(Clock::time_point when) const {
    return std::chrono::duration<double>(when - started_at_).count();
}

void SupervisorRun::signal(int signal) const {
    if (!status_) ::kill(pid_, signal);
}

std::optional<int> SupervisorRun::poll_exit() {
    if (status_) return status_;
    int raw = 0;
    if (::waitpid(pid_, &raw, WNOHANG) == pid_) {
        status_ = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    }
    return status_;
}

std::optional<int> SupervisorRun::wait(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!poll_exit() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return status_;
}

}  // namespace comfy::soak
