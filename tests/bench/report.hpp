#pragma once
// Turns one run's measurements into the human report or the JSON object, both with the
// ratios against the ring's targets computed from this same run.

#include "tests/bench/round_trip.hpp"

#include <cstdint>
#include <ostream>
#include <string>

namespace comfy::bench {

struct RingBenchResults {
    std::string cpu_placement;
    RoundTripPlan spinning_plan;
    RoundTripPlan blocking_plan;
    LatencySummary shared_word_floor;
    LatencySummary ring_spin;
    LatencySummary eventfd;
    LatencySummary ring_futex;
    LatencySummary ring_eventfd;
    LatencySummary unix_socket;
    LatencySummary pipe;
    LatencySummary boost_message_queue;
    std::uint64_t throughput_messages;
    std::uint32_t throughput_capacity;
    double ring_throughput_msgs_per_s;
};

void print_human_report(const RingBenchResults& results, std::ostream& out);

// Exactly one JSON object, on one line.
void print_json_report(const RingBenchResults& results, std::ostream& out);

}  // namespace comfy::bench
