#include "tests/bench/round_trip.hpp"

#include "tests/bench/bench_error.hpp"

#include <algorithm>
#include <string>

namespace comfy::bench {

namespace {
// The smallest sample with at least `percent` % of the samples at or below it.
std::int64_t nearest_rank(const std::vector<std::int64_t>& sorted, std::size_t percent) {
    const std::size_t rank = (sorted.size() * percent + 99) / 100;  // ceil, 1-based
    return sorted[std::max<std::size_t>(rank, 1) - 1];
}
}  // namespace

LatencySummary summarise_latencies(std::vector<std::int64_t> samples_ns) {
    std::sort(samples_ns.begin(), samples_ns.end());
    return {nearest_rank(samples_ns, 50), nearest_rank(samples_ns, 99)};
}

void check_sequence(std::string_view measurement, std::uint64_t expected, std::uint64_t received) {
    if (received == expected) return;
    throw BenchError(std::string(measurement) + ": expected message " + std::to_string(expected) + " but got " +
                     std::to_string(received) +
                     "; the transport lost, duplicated or reordered a message, which is a bug: report it");
}

}  // namespace comfy::bench
