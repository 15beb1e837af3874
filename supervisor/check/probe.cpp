#include "supervisor/check/probe.hpp"

#include "shared/json_errors.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>

namespace comfy::supervisor {

namespace {

enum class Read { data, later, end };

// Appends what `fd` has now.
Read read_some(int fd, std::string& output) {
    char chunk[65536];
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0) return errno == EINTR || errno == EAGAIN ? Read::later : Read::end;
    if (n == 0) return Read::end;
    output.append(chunk, static_cast<std::size_t>(n));
    // The tail is what tells: the description (printed last) or the error line.
    if (output.size() > kProbeOutputBytes) output.erase(0, output.size() - kProbeOutputBytes / 2);
    return Read::data;
}

}  // namespace

ProbeResult Prober::run(SpawnRequest request, Milliseconds limit) {
    ProbeResult result;
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
        result.failure = "pipe2: " + system_message(errno);
        return result;
    }
    request.output_fd = pipe_fds[1];
    SpawnedProcess process;
    try {
        process = spawn_process(request);
    } catch (const std::system_error& error) {
        ::close(pipe_fds[0]);
        ::close(pipe_fds[1]);
        result.failure = error.what();
        return result;
    }
    ::close(pipe_fds[1]);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    bool exited = false;
    bool open = true;
    while (!exited) {
        const auto left = std::chrono::duration_cast<Milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) break;
        pollfd polls[2] = {{process.pidfd, POLLIN, 0}, {pipe_fds[0], POLLIN, 0}};
        if (::poll(polls, open ? 2 : 1, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
        if (open && polls[1].revents != 0) open = read_some(pipe_fds[0], result.output) != Read::end;
        exited = (polls[0].revents & POLLIN) != 0;
    }
    if (!exited) {
        ::kill(-process.pid, SIGKILL);
        result.timed_out = true;
        result.failure = "did not end within " + std::to_string(limit.count()) + " ms";
    }
    // What it wrote before it ended; a process it left may hold the pipe open, so no
    // waiting for the end of the pipe.
    ::fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
    for (Read read = Read::data; open && read == Read::data;) read = read_some(pipe_fds[0], result.output);
    ::close(pipe_fds[0]);
    int status = 0;
    while (::waitpid(process.pid, &status, 0) < 0 && errno == EINTR) {
    }
    ::close(process.pidfd);
    if (const auto start = take_start_failure(process); start.error != 0 && result.failure.empty()) {
        result.failure = "cannot be started: " + system_message(start.error);
    }
    if (WIFEXITED(status)) result.status = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
    end_leftovers(process.pid);
    return result;
}

void Prober::end_leftovers(pid_t group) {
    ::kill(-group, SIGKILL);
    // A process that left the group came here when its parent ended (we are the subreaper):
    // each sweep kills every child there is, and each wait takes one that died, until none is
    // left. One whose parent dies meanwhile comes here and is killed at the next sweep.
    while (true) {
        strays_.sweep([](pid_t) { return false; });
        if (strays_.unreaped() == 0) return;
        if (::waitpid(-1, nullptr, 0) < 0 && errno == ECHILD) return;
    }
}

std::string last_line(const std::string& output) {
    const auto end = output.find_last_not_of("\r\n");
    if (end == std::string::npos) return {};
    const auto newline = output.rfind('\n', end);
    const auto start = newline == std::string::npos ? 0 : newline + 1;
    return output.substr(start, end + 1 - start);
}

}  // namespace comfy::supervisor
