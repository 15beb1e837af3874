#include "tests/bench/spawn_cpu.hpp"

#include "supervisor/supervisor.hpp"
#include "tests/bench/forked_measurement.hpp"
#include "tests/bench/worker_fleet.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace comfy::bench {

namespace {

// The measurement itself, in the process that runs the supervisor.
double measure(const std::filesystem::path& worker, std::uint32_t workers) {
    raise_open_files(workers);
    const PackFolder folder("comfy-bench-spawn-" + std::to_string(workers),
                            R"({"nodes": {"noop": [{"op": "compute", "ms": 1}]}})");
    double started = 0;
    double ready = -1;
    supervisor::Supervisor supervisor(fleet_config(worker, folder.pack(), workers),
                                      "bench-spawn-" + std::to_string(::getpid()) + "-" + std::to_string(workers));
    supervisor.on_all_started([&] {
        ready = thread_cpu_us();
        supervisor.begin_shutdown("benchmark done");
    });
    started = thread_cpu_us();
    supervisor.run();
    const supervisor::Totals totals = supervisor.totals();
    if (ready < 0 || totals.workers_started != workers || totals.workers_restarted != 0) {
        throw std::runtime_error("spawn_cpu: " + std::to_string(totals.workers_started) + " starts and " +
                                 std::to_string(totals.workers_restarted) + " restarts for " + std::to_string(workers) +
                                 " workers; every worker must start once");
    }
    return (ready - started) / workers;
}

}  // namespace

double supervisor_cpu_per_spawn_us(const std::filesystem::path& worker, std::uint32_t workers) {
    return measured_in_child<double>("spawn_cpu with " + std::to_string(workers) + " workers",
                                     [&] { return measure(worker, workers); });
}

}  // namespace comfy::bench
