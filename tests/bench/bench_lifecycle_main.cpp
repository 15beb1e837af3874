// bench-lifecycle: how fast the supervisor starts a worker, sees it die, and has its
// replacement ready. One pack of comfy-worker; 50 cycles of: ready -> SIGKILL -> exit seen
// -> replacement ready (backoff zero). Prints median and p99 of each, or JSON (--json).
//
//   spawn_to_ready_ms  from fork+exec to the accepted Hello
//   death_detect_ms    from our kill(SIGKILL) to the loop handling the pidfd
//   restart_ready_ms   from our kill(SIGKILL) to the replacement's accepted Hello
//
// Then an echo to one worker with N-1 idle workers beside it, N = 1 and 1,023
// (echo_workers.hpp), each in a child forked first thing:
//   echo_p1_us, echo_p1023_us          the echo's round trip (p50, p99)
//   echo_cpu_p1_us, echo_cpu_p1023_us  the supervisor's CPU per echo
//   new_prompt_echo_cpu_p1_us, ..._p1023_us  the same when every echo is a new prompt
// and the ratios of the 1,023 figures to the 1 figures (targets: <= 1.3).

#include "supervisor/config/config.hpp"
#include "supervisor/supervisor.hpp"
#include "tests/bench/echo_workers.hpp"

#include <nlohmann/json.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using comfy::supervisor::Supervisor;
constexpr int kCycles = 50;
constexpr std::uint32_t kManyWorkers = 1023;

struct Percentiles {
    double p50;
    double p99;
};

Percentiles percentiles(std::vector<double> samples) {
    std::sort(samples.begin(), samples.end());
    const auto at = [&](double q) { return samples[static_cast<std::size_t>(q * static_cast<double>(samples.size() - 1))]; };
    return {at(0.50), at(0.99)};
}

double ms_between(Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double, std::milli>(to - from).count();
}

}  // namespace

int main(int argc, char* argv[]) {
    const bool json_output = argc > 1 && std::strcmp(argv[1], "--json") == 0;
    const std::filesystem::path bin = std::filesystem::canonical("/proc/self/exe").parent_path();
    // First, while this process is small: each is measured in a child forked from it.
    comfy::bench::EchoFigures one{}, many{};
    try {
        one = comfy::bench::echo_with_idle_workers(bin / "comfy-worker", 1);
        many = comfy::bench::echo_with_idle_workers(bin / "comfy-worker", kManyWorkers);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench-lifecycle: %s\n", e.what());
        return 1;
    }
    const auto folder = std::filesystem::temp_directory_path() / ("comfy-bench-lifecycle-" + std::to_string(::getpid()));
    std::filesystem::create_directories(folder);
    std::ofstream(folder / "pack.json") << R"({"nodes": {"noop": [{"op": "compute", "ms": 1}]}})";

    comfy::supervisor::Config config;
    config.source = "bench";
    config.device.kind = comfy::supervisor::DeviceKind::simulated;  // the default is the machine's GPU
    comfy::supervisor::PackConfig pack;
    pack.name = "bench";
    pack.command = (bin / "comfy-worker").string();
    pack.args = {"--pack", (folder / "pack.json").string()};
    pack.working_directory = folder.string();
    pack.restart = {std::chrono::milliseconds(0), std::chrono::milliseconds(0), 1000, std::chrono::milliseconds(1)};
    config.packs.push_back(pack);

    std::vector<double> spawn_to_ready, death_detect, restart_ready;
    std::map<std::uint32_t, Clock::time_point> spawned_at;
    Clock::time_point killed_at{};
    int code = 0;
    try {
        Supervisor supervisor(config, "bench-" + std::to_string(::getpid()));
        supervisor.observe([&](Supervisor::WorkerEvent event, const comfy::supervisor::WorkerProcess& worker) {
            const auto now = Clock::now();
            switch (event) {
                case Supervisor::WorkerEvent::spawned: spawned_at[worker.generation] = now; break;
                case Supervisor::WorkerEvent::exited: death_detect.push_back(ms_between(killed_at, now)); break;
                case Supervisor::WorkerEvent::ready:
                    spawn_to_ready.push_back(ms_between(spawned_at[worker.generation], now));
                    if (worker.generation > 1) restart_ready.push_back(ms_between(killed_at, now));
                    if (worker.generation > kCycles) {
                        supervisor.begin_shutdown("benchmark done");
                    } else {
                        killed_at = Clock::now();
                        ::kill(worker.process.pid, SIGKILL);
                    }
                    break;
            }
        });
        code = supervisor.run();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench-lifecycle: %s\n", e.what());
        code = 1;
    }
    std::filesystem::remove_all(folder);
    if (code != 0 || restart_ready.size() < kCycles) {
        std::fprintf(stderr, "bench-lifecycle: the run did not complete %d cycles\n", kCycles);
        return 1;
    }
    const auto spawn = percentiles(spawn_to_ready);
    const auto death = percentiles(death_detect);
    const auto restart = percentiles(restart_ready);
    if (json_output) {
        const auto entry = [](const Percentiles& p) { return nlohmann::json{{"p50", p.p50}, {"p99", p.p99}}; };
        std::printf("%s\n", nlohmann::json{{"spawn_to_ready_ms", entry(spawn)},
                                           {"death_detect_ms", entry(death)},
                                           {"restart_ready_ms", entry(restart)},
                                           {"cycles", kCycles},
                                           {"echo_p1_us", entry({one.rtt_p50_us, one.rtt_p99_us})},
                                           {"echo_p1023_us", entry({many.rtt_p50_us, many.rtt_p99_us})},
                                           {"echo_p1023_vs_p1", many.rtt_p50_us / one.rtt_p50_us},
                                           {"echo_cpu_p1_us", one.cpu_per_echo_us},
                                           {"echo_cpu_p1023_us", many.cpu_per_echo_us},
                                           {"echo_cpu_p1023_vs_p1", many.cpu_per_echo_us / one.cpu_per_echo_us},
                                           {"new_prompt_echo_cpu_p1_us", one.cpu_per_new_prompt_echo_us},
                                           {"new_prompt_echo_cpu_p1023_us", many.cpu_per_new_prompt_echo_us},
                                           {"new_prompt_echo_cpu_p1023_vs_p1",
                                            many.cpu_per_new_prompt_echo_us / one.cpu_per_new_prompt_echo_us}}
                                .dump()
                                .c_str());
        return 0;
    }
    std::printf("lifecycle over %d cycles (one comfy-worker, backoff 0)\n", kCycles);
    std::printf("  spawn_to_ready_ms  p50 %7.3f  p99 %7.3f   target p50 < 20   %s\n", spawn.p50, spawn.p99,
                spawn.p50 < 20 ? "met" : "missed");
    std::printf("  death_detect_ms    p50 %7.3f  p99 %7.3f   target p50 < 5    %s\n", death.p50, death.p99,
                death.p50 < 5 ? "met" : "missed");
    std::printf("  restart_ready_ms   p50 %7.3f  p99 %7.3f\n", restart.p50, restart.p99);
    const double rtt_ratio = many.rtt_p50_us / one.rtt_p50_us;
    const double cpu_ratio = many.cpu_per_echo_us / one.cpu_per_echo_us;
    std::printf("echo to one worker, with 0 and %u idle workers beside it\n", kManyWorkers - 1);
    std::printf("  round trip p50 (us)       %8.1f  %8.1f   ratio %.2f   target <= 1.3   %s\n", one.rtt_p50_us,
                many.rtt_p50_us, rtt_ratio, rtt_ratio <= 1.3 ? "met" : "missed");
    std::printf("  round trip p99 (us)       %8.1f  %8.1f\n", one.rtt_p99_us, many.rtt_p99_us);
    std::printf("  supervisor CPU/echo (us)  %8.2f  %8.2f   ratio %.2f   target <= 1.3   %s\n", one.cpu_per_echo_us,
                many.cpu_per_echo_us, cpu_ratio, cpu_ratio <= 1.3 ? "met" : "missed");
    std::printf("  ... each a new prompt     %8.2f  %8.2f   ratio %.2f\n", one.cpu_per_new_prompt_echo_us,
                many.cpu_per_new_prompt_echo_us, many.cpu_per_new_prompt_echo_us / one.cpu_per_new_prompt_echo_us);
    return 0;
}
