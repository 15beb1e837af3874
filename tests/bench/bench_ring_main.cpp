// bench-ring: round-trip latency of our shared-memory ring between two processes, against
// the floor (a bare shared-word spin) and the usual kernel and library mechanisms, plus
// the ring's one-way throughput. Run it through `scripts/bench ring [--json]`.

#include "tests/bench/bench_error.hpp"
#include "tests/bench/os_baselines.hpp"
#include "tests/bench/peer_process.hpp"
#include "tests/bench/report.hpp"
#include "tests/bench/ring_transports.hpp"

#include <cstdint>
#include <exception>
#include <iostream>
#include <string_view>

using namespace comfy::bench;

namespace {

// Sized to keep the whole run well under a minute on a two-core machine.
constexpr RoundTripPlan kSpinningPlan{.warm_up_rounds = 2000, .timed_rounds = 100000};
constexpr RoundTripPlan kBlockingPlan{.warm_up_rounds = 2000, .timed_rounds = 30000};
constexpr std::uint64_t kThroughputMessages = 20'000'000;
constexpr std::uint32_t kThroughputCapacity = 1024;

constexpr std::string_view kUsage = "usage: bench-ring [--json]";

// Each ring figure is measured right after the baseline it is divided by, so slow drift
// in the machine's load distorts the ratios as little as possible.
RingBenchResults measure_everything() {
    const CpuPlacement cpus = pin_initiator_and_choose_peer_cpu();
    RingBenchResults r{};
    r.cpu_placement = cpus.description;
    r.spinning_plan = kSpinningPlan;
    r.blocking_plan = kBlockingPlan;
    r.shared_word_floor = measure_shared_word_floor(kSpinningPlan, cpus);
    r.ring_spin = measure_ring_round_trips(RingWake::spin, kSpinningPlan, cpus);
    r.eventfd = measure_eventfd_ping_pong(kBlockingPlan, cpus);
    r.ring_futex = measure_ring_round_trips(RingWake::futex, kBlockingPlan, cpus);
    r.ring_eventfd = measure_ring_round_trips(RingWake::eventfd, kBlockingPlan, cpus);
    r.unix_socket = measure_unix_socket_ping_pong(kBlockingPlan, cpus);
    r.pipe = measure_pipe_ping_pong(kBlockingPlan, cpus);
    r.boost_message_queue = measure_boost_message_queue_ping_pong(kBlockingPlan, cpus);
    r.throughput_messages = kThroughputMessages;
    r.throughput_capacity = kThroughputCapacity;
    r.ring_throughput_msgs_per_s = measure_ring_throughput(kThroughputMessages, kThroughputCapacity, cpus);
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    bool json = false;
    for (int i = 1; i < argc; ++i) {
        const std::string_view argument = argv[i];
        if (argument == "--json") {
            json = true;
        } else if (argument == "-h" || argument == "--help") {
            std::cout << kUsage << '\n';
            return 0;
        } else {
            std::cerr << "bench-ring: unknown argument '" << argument << "'; " << kUsage << '\n';
            return 2;
        }
    }
    try {
        const RingBenchResults results = measure_everything();
        if (json) {
            print_json_report(results, std::cout);
        } else {
            print_human_report(results, std::cout);
        }
    } catch (const BenchError& error) {
        std::cerr << "bench-ring: " << error.what() << '\n';
        return 1;
    } catch (const std::exception& error) {
        std::cerr << "bench-ring: unexpected error: " << error.what() << "; rerun, and report it if it repeats\n";
        return 1;
    }
    return 0;
}
