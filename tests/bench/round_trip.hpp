#pragma once
// The round-trip harness: this process sends a message, a forked peer echoes it back, and
// each round trip is timed with steady_clock. Both sides check the sequence number, so a
// transport that loses or reorders a message fails the run instead of flattering it.

#include "tests/bench/message.hpp"
#include "tests/bench/peer_process.hpp"

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace comfy::bench {

struct RoundTripPlan {
    // Untimed: they fault the pages in, wake both CPUs from idle states and warm the caches.
    std::size_t warm_up_rounds;
    std::size_t timed_rounds;
};

struct LatencySummary {
    std::int64_t p50_ns = 0;
    std::int64_t p99_ns = 0;
};

// Nearest-rank median and 99th percentile; `samples_ns` must not be empty.
LatencySummary summarise_latencies(std::vector<std::int64_t> samples_ns);

// Throws BenchError naming `measurement` when `received` is not `expected`.
void check_sequence(std::string_view measurement, std::uint64_t expected, std::uint64_t received);

// One process's side of a ping-pong transport.
template <class E>
concept RoundTripEndpoint = requires(E endpoint, Message64& received, const Message64& sent) {
    endpoint.send(sent);
    endpoint.receive(received);
};

// A transport set up before fork, so that both processes share it; each then takes its side.
template <class C>
concept RoundTripChannel = requires(C channel) {
    { channel.initiator() } -> RoundTripEndpoint;
    { channel.peer() } -> RoundTripEndpoint;
};

template <RoundTripChannel Channel>
LatencySummary measure_round_trips(std::string_view measurement, Channel& channel, const RoundTripPlan& plan,
                                   const CpuPlacement& cpus) {
    const std::size_t rounds = plan.warm_up_rounds + plan.timed_rounds;
    auto echo_every_round = [&] {
        auto endpoint = channel.peer();
        Message64 message;
        for (std::size_t round = 0; round < rounds; ++round) {
            endpoint.receive(message);
            check_sequence(measurement, round, message.sequence);
            endpoint.send(message);
        }
    };
    auto time_every_round = [&] {
        auto endpoint = channel.initiator();
        std::vector<std::int64_t> samples_ns;
        samples_ns.reserve(plan.timed_rounds);
        Message64 message;
        for (std::size_t round = 0; round < rounds; ++round) {
            message.sequence = round;
            const auto start = std::chrono::steady_clock::now();
            endpoint.send(message);
            endpoint.receive(message);
            const auto stop = std::chrono::steady_clock::now();
            check_sequence(measurement, round, message.sequence);
            if (round >= plan.warm_up_rounds) samples_ns.push_back((stop - start).count());
        }
        return summarise_latencies(std::move(samples_ns));
    };
    return run_with_peer_process(measurement, cpus, echo_every_round, time_every_round);
}

}  // namespace comfy::bench
