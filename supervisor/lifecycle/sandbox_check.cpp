#include "supervisor/lifecycle/sandbox_check.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace comfy::supervisor {

namespace {

const PackConfig* first_sandboxed(const Config& config) {
    if (config.comfyui && config.comfyui->sandbox) return &*config.comfyui;
    for (const auto& pack : config.packs) {
        if (pack.sandbox) return &pack;
    }
    return nullptr;
}

// Runs `request` with its stdout discarded; the first line bwrap wrote to stderr, or the
// way it ended when it wrote nothing. Empty when it ran and exited with status 0.
std::string run_failure(const SpawnRequest& request) {
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return std::string("pipe2: ") + std::strerror(errno);
    posix_spawn_file_actions_t actions;
    ::posix_spawn_file_actions_init(&actions);
    ::posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    ::posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    ::posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
    std::vector<char*> argv{const_cast<char*>(request.command.c_str())};
    for (const auto& arg : request.args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    char* no_environment[] = {nullptr};
    pid_t pid = -1;
    const int spawn_error = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), no_environment);
    ::posix_spawn_file_actions_destroy(&actions);
    ::close(pipe_fds[1]);
    if (spawn_error != 0) {
        ::close(pipe_fds[0]);
        return request.command + ": " + std::strerror(spawn_error);
    }
    std::string output;
    char buffer[512];
    ssize_t n = 0;
    while ((n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0 || (n < 0 && errno == EINTR)) {
        if (n > 0) output.append(buffer, static_cast<std::size_t>(n));
    }
    ::close(pipe_fds[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
    if (const auto end = output.find('\n'); end != std::string::npos) output.resize(end);
    if (!output.empty()) return output;
    if (WIFSIGNALED(status)) return std::string("bwrap was killed by SIG") + sigabbrev_np(WTERMSIG(status));
    return "bwrap exited with status " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

std::optional<std::string> sandbox_problem(const Config& config, const std::string& bwrap) {
    const PackConfig* asking = first_sandboxed(config);
    if (asking == nullptr) return std::nullopt;
    const bool host = config.comfyui && asking == &*config.comfyui;
    const std::string who = config.source + ": " +
                            (host ? std::string("the ComfyUI host (/comfyui)") : "pack \"" + asking->name + "\"") +
                            " asks for a sandbox, but ";
    const std::string or_remove = " or remove its \"sandbox\" from the config";
    if (::access(bwrap.c_str(), X_OK) != 0) {
        return who + bwrap + " cannot be run (" + std::strerror(errno) + "); install bubblewrap (apt-get install bubblewrap)" +
               or_remove;
    }
    // The sandbox that participant would get, around a program every Debian system has.
    SpawnRequest trial;
    trial.command = "/bin/true";
    trial.working_directory = asking->working_directory;
    SpawnRequest probe = sandboxed_request(trial, *asking->sandbox, gpu_device_nodes());
    probe.command = bwrap;
    const std::string failure = run_failure(probe);
    if (failure.empty()) return std::nullopt;
    return who + "bwrap cannot make one here: " + failure +
           "; let it create namespaces (see \"When bwrap cannot run\" in docs/SECURITY.md)" + or_remove;
}

}  // namespace comfy::supervisor
