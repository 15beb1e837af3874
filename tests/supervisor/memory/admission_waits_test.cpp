// How long admissions waited for their answers: a histogram of cumulative buckets, each
// request counted once, and none of a life that is gone.
#include <catch2/catch.hpp>

#include "supervisor/memory/admission_waits.hpp"

using namespace comfy::supervisor;

TEST_CASE("admission waits land in cumulative buckets, and a forgotten life's requests are never counted") {
    using namespace std::chrono_literals;
    AdmissionWaits waits;
    const AdmissionWaits::Clock::time_point t0{};
    waits.asked(1, 7, 100, t0);
    waits.asked(2, 7, 200, t0);
    waits.asked(3, 1, 300, t0);
    const auto first = waits.answered(1, 7, t0 + 3ms);
    REQUIRE(first);
    CHECK(first->asked == 100);
    CHECK(first->waited_seconds == Approx(0.003));
    CHECK(waits.answered(2, 7, t0 + 2s));
    CHECK_FALSE(waits.answered(1, 7, t0 + 3s));  // answered once only
    waits.forget(3);
    CHECK_FALSE(waits.answered(3, 1, t0 + 1s));
    const auto& histogram = waits.histogram();
    CHECK(histogram.count == 2);
    CHECK(histogram.sum_seconds == Approx(2.003));
    CHECK(histogram.cumulative.front() == 0);        // <= 1 ms
    CHECK(histogram.cumulative[1] == 1);             // <= 5 ms
    CHECK(histogram.cumulative[6] == 1);             // <= 1 s
    CHECK(histogram.cumulative[7] == 2);             // <= 2.5 s
    CHECK(histogram.cumulative.back() == 2);
}
