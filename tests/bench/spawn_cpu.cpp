#include "tests/bench/spawn_cpu.hpp"

#include "supervisor/supervisor.hpp"

#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>

namespace comfy::bench {

namespace {

double thread_cpu_us() {
    timespec now{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return static_cast<double>(now.tv_sec) * 1e6 + static_cast<double>(now.tv_nsec) / 1e3;
}

// The supervisor holds a pidfd per worker: make sure a 1,024 soft limit does not stop it.
void raise_open_files(std::uint32_t needed) {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= needed + 64) return;
    limit.rlim_cur = std::min<rlim_t>(limit.rlim_max, needed + 64);
    ::setrlimit(RLIMIT_NOFILE, &limit);
}

supervisor::Config spawn_config(const std::filesystem::path& worker, const std::filesystem::path& pack,
                                std::uint32_t workers) {
    supervisor::Config config;
    config.source = "bench";
    // Sized as a user would size it: the default 64 participants, or the pack count plus
    // the host's slot when that is more.
    config.limits.capacities.participants = std::max<std::uint32_t>(config.limits.capacities.participants, workers + 1);
    // A thousand processes starting on a small machine may take longer than the defaults
    // allow before Hello; a worker killed for it would restart and count twice.
    config.limits.handshake_timeout = std::chrono::minutes(2);
    for (std::uint32_t i = 0; i < workers; ++i) {
        supervisor::PackConfig p;
        // Appended: `"w" + std::string` makes GCC 12 at -O3 warn (-Wrestrict, a false
        // positive inside std::string's insert), an error with -Werror.
        p.name = std::string("w").append(std::to_string(i + 1));
        p.command = worker.string();
        p.args = {"--pack", pack.string()};
        p.working_directory = pack.parent_path().string();
        config.packs.push_back(std::move(p));
    }
    return config;
}


// The measurement itself, in the process that runs the supervisor.
double measure(const std::filesystem::path& worker, std::uint32_t workers) {
    raise_open_files(workers);
    const auto tag = std::to_string(::getpid()) + "-" + std::to_string(workers);
    const auto folder = std::filesystem::temp_directory_path() / ("comfy-bench-spawn-" + tag);
    std::filesystem::create_directories(folder);
    std::ofstream(folder / "pack.json") << R"({"nodes": {"noop": [{"op": "compute", "ms": 1}]}})";
    double started = 0;
    double ready = -1;
    supervisor::Totals totals{};
    try {
        supervisor::Supervisor supervisor(spawn_config(worker, folder / "pack.json", workers), "bench-spawn-" + tag);
        supervisor.on_all_started([&] {
            ready = thread_cpu_us();
            supervisor.begin_shutdown("benchmark done");
        });
        started = thread_cpu_us();
        supervisor.run();
        totals = supervisor.totals();
    } catch (...) {
        std::filesystem::remove_all(folder);
        throw;
    }
    std::filesystem::remove_all(folder);
    if (ready < 0 || totals.workers_started != workers || totals.workers_restarted != 0) {
        throw std::runtime_error("spawn_cpu: " + std::to_string(totals.workers_started) + " starts and " +
                                 std::to_string(totals.workers_restarted) + " restarts for " + std::to_string(workers) +
                                 " workers; every worker must start once");
    }
    return (ready - started) / workers;
}

}  // namespace

double supervisor_cpu_per_spawn_us(const std::filesystem::path& worker, std::uint32_t workers) {
    // Each measurement runs in a child forked for it, so that every one starts from the
    // same process: a fork's cost grows with the forking process's memory, and an earlier
    // run's heap (a thousand workers' state) would otherwise weigh on the next one's spawns.
    int result[2];
    if (::pipe(result) != 0) throw std::runtime_error("spawn_cpu: pipe failed");
    const pid_t child = ::fork();
    if (child < 0) throw std::runtime_error("spawn_cpu: fork failed");
    if (child == 0) {
        ::close(result[0]);
        int status = 0;
        try {
            const double figure = measure(worker, workers);
            status = ::write(result[1], &figure, sizeof figure) == static_cast<ssize_t>(sizeof figure) ? 0 : 1;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "bench-arbitration: %s\n", e.what());
            status = 1;
        }
        ::_exit(status);  // the measurement's own objects are gone; nothing of the parent's runs
    }
    ::close(result[1]);
    double figure = 0;
    const bool read_whole = ::read(result[0], &figure, sizeof figure) == static_cast<ssize_t>(sizeof figure);
    ::close(result[0]);
    int status = 0;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (!read_whole || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        throw std::runtime_error("spawn_cpu: the measurement with " + std::to_string(workers) + " workers failed");
    }
    return figure;
}

}  // namespace comfy::bench
