#include "tests/bench/report.hpp"

#include "tests/bench/ring_transports.hpp"

#include <nlohmann/json.hpp>

#include <iomanip>
#include <sstream>
#include <string_view>
#include <vector>

namespace comfy::bench {

namespace {

struct LatencyRow {
    std::string_view json_key;
    std::string label;
    LatencySummary summary;
    std::size_t timed_rounds;
};

std::vector<LatencyRow> latency_rows(const RingBenchResults& r) {
    const std::size_t spinning = r.spinning_plan.timed_rounds;
    const std::size_t blocking = r.blocking_plan.timed_rounds;
    return {
        {"ring_spin_rtt_ns", "ring, busy-polling", r.ring_spin, spinning},
        {"ring_futex_rtt_ns", "ring, futex wait (spin " + std::to_string(kRingFutexSpin.count()) + " ns)",
         r.ring_futex, blocking},
        {"ring_eventfd_rtt_ns", "ring, eventfd doorbell", r.ring_eventfd, blocking},
        {"floor_spin_rtt_ns", "floor: spin on one shared word", r.shared_word_floor, spinning},
        {"eventfd_rtt_ns", "eventfd, blocking read", r.eventfd, blocking},
        {"uds_rtt_ns", "unix socket (stream)", r.unix_socket, blocking},
        {"pipe_rtt_ns", "pipe", r.pipe, blocking},
        {"bi_mq_rtt_ns", "boost message_queue", r.boost_message_queue, blocking},
    };
}

struct TargetCheck {
    std::string_view json_key;
    std::string_view label;
    double value;
    double limit;
    bool limit_is_minimum;  // throughput must reach it; ratios must stay under it

    bool met() const noexcept { return limit_is_minimum ? value >= limit : value <= limit; }
};

double p50_ratio(const LatencySummary& numerator, const LatencySummary& denominator) {
    return static_cast<double>(numerator.p50_ns) / static_cast<double>(denominator.p50_ns);
}

std::vector<TargetCheck> ratio_checks(const RingBenchResults& r) {
    return {
        {"ring_spin_over_floor_p50", "ring spin p50 / floor p50", p50_ratio(r.ring_spin, r.shared_word_floor), 2.0,
         false},
        {"ring_futex_over_eventfd_p50", "ring futex p50 / eventfd p50", p50_ratio(r.ring_futex, r.eventfd), 1.5,
         false},
        {"ring_eventfd_over_eventfd_p50", "ring eventfd p50 / eventfd p50", p50_ratio(r.ring_eventfd, r.eventfd),
         1.5, false},
    };
}

constexpr double kThroughputTarget = 20e6;

TargetCheck throughput_check(const RingBenchResults& r) {
    return {"ring_throughput_msgs_per_s", "ring throughput, M msgs/s", r.ring_throughput_msgs_per_s / 1e6,
            kThroughputTarget / 1e6, true};
}

void print_target(const TargetCheck& check, std::ostream& out) {
    std::ostringstream limit;
    limit << (check.limit_is_minimum ? ">= " : "<= ") << check.limit;
    out << std::left << std::setw(34) << check.label << std::right << std::setw(8) << std::fixed
        << std::setprecision(2) << check.value << std::defaultfloat << "   " << std::left << std::setw(8)
        << limit.str() << std::right << (check.met() ? "met" : "missed") << '\n';
}

}  // namespace

void print_human_report(const RingBenchResults& r, std::ostream& out) {
    out << "bench-ring: one 64-byte message between two processes; " << r.cpu_placement << "\n"
        << "warm-up " << r.spinning_plan.warm_up_rounds << " rounds before each measurement\n\n";
    out << std::left << std::setw(34) << "round trip" << std::right << std::setw(10) << "p50 ns" << std::setw(10)
        << "p99 ns" << std::setw(14) << "timed rounds" << '\n';
    for (const auto& row : latency_rows(r)) {
        out << std::left << std::setw(34) << row.label << std::right << std::setw(10) << row.summary.p50_ns
            << std::setw(10) << row.summary.p99_ns << std::setw(14) << row.timed_rounds << '\n';
    }
    out << "\nring throughput, one way: " << std::fixed << std::setprecision(1) << r.ring_throughput_msgs_per_s / 1e6
        << std::defaultfloat << " M msgs/s (" << r.throughput_messages << " messages, ring of "
        << r.throughput_capacity << ")\n\n";
    out << std::left << std::setw(34) << "target" << std::right << std::setw(8) << "value" << "   " << std::left
        << std::setw(8) << "limit" << "result\n" << std::right;
    for (const auto& check : ratio_checks(r)) print_target(check, out);
    print_target(throughput_check(r), out);
}

void print_json_report(const RingBenchResults& r, std::ostream& out) {
    nlohmann::ordered_json report;
    for (const auto& row : latency_rows(r)) {
        report[std::string(row.json_key)] = {{"p50", row.summary.p50_ns}, {"p99", row.summary.p99_ns}};
    }
    report["ring_throughput_msgs_per_s"] = r.ring_throughput_msgs_per_s;
    auto& ratios = report["ratios"];
    auto& targets_met = report["targets_met"];
    for (const auto& check : ratio_checks(r)) {
        ratios[std::string(check.json_key)] = check.value;
        targets_met[std::string(check.json_key)] = check.met();
    }
    targets_met["ring_throughput_msgs_per_s"] = throughput_check(r).met();
    report["ring_futex_spin_ns"] = kRingFutexSpin.count();
    report["cpu_placement"] = r.cpu_placement;
    out << report.dump() << '\n';
}

}  // namespace comfy::bench
