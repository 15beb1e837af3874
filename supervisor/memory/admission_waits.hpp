#pragma once
// How long each admission waited, from the request reaching the supervisor to its grant or
// refusal (evictions and releases of other processes happen in between), kept as a
// Prometheus histogram in seconds, and what each answered request asked for, so the event
// journal can say "granted 14 GiB after 0.8 s".

#include "shared/memory_arithmetic.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

namespace comfy::supervisor {

class AdmissionWaits {
public:
    using Clock = std::chrono::steady_clock;
    // Upper bounds of the buckets, in seconds: a grant from free memory takes microseconds,
    // one behind evictions milliseconds to seconds, one behind a deaf pack its answer
    // time-out.
    static constexpr std::array<double, 10> kBuckets{0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 10, 30};

    struct Histogram {
        std::array<std::uint64_t, kBuckets.size()> cumulative{};  // requests that waited <= each bound
        std::uint64_t count = 0;
        double sum_seconds = 0;
    };
    struct Answered {
        Bytes asked;
        double waited_seconds;
    };

    void asked(std::uint32_t slot, std::uint64_t correlation, Bytes bytes, Clock::time_point now);
    // The request's figures, counted into the histogram; nothing for one not asked (or
    // already answered or forgotten).
    std::optional<Answered> answered(std::uint32_t slot, std::uint64_t correlation, Clock::time_point now);
    // The life in `slot` ended: its unanswered requests were withdrawn, not answered.
    void forget(std::uint32_t slot);

    const Histogram& histogram() const noexcept { return histogram_; }

private:
    struct Pending {
        Bytes bytes;
        Clock::time_point at;
    };
    std::map<std::pair<std::uint32_t, std::uint64_t>, Pending> pending_;
    Histogram histogram_;
};

}  // namespace comfy::supervisor
