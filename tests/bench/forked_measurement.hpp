#pragma once
// Runs one measurement in a child forked for it, first thing, so that every measurement
// starts from the same small process: a fork's cost grows with the forking process's
// memory, and an earlier run's heap (a thousand workers' state) would otherwise weigh on
// the next one. The child sends its figures back through a pipe and exits without running
// anything of the parent's.

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace comfy::bench {

// `measure()`'s figures (trivially copyable), measured in a fresh child. Throws
// std::runtime_error naming `what` when the child failed (its reason is on stderr).
template <class Figures, class Measure>
Figures measured_in_child(const std::string& what, Measure measure) {
    static_assert(std::is_trivially_copyable_v<Figures>, "figures cross a pipe as bytes");
    int result[2];
    if (::pipe(result) != 0) throw std::runtime_error(what + ": pipe failed");
    const pid_t child = ::fork();
    if (child < 0) throw std::runtime_error(what + ": fork failed");
    if (child == 0) {
        ::close(result[0]);
        int status = 0;
        try {
            const Figures figures = measure();
            status = ::write(result[1], &figures, sizeof figures) == static_cast<ssize_t>(sizeof figures) ? 0 : 1;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "%s: %s\n", what.c_str(), e.what());
            status = 1;
        }
        ::_exit(status);  // the measurement's own objects are gone; nothing of the parent's runs
    }
    ::close(result[1]);
    Figures figures{};
    const bool read_whole = ::read(result[0], &figures, sizeof figures) == static_cast<ssize_t>(sizeof figures);
    ::close(result[0]);
    int status = 0;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (!read_whole || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        throw std::runtime_error(what + ": the measurement failed");
    }
    return figures;
}

}  // namespace comfy::bench
