// The restart decision alone: doubling backoff with a cap, and the intensity limit.
#include <catch2/catch.hpp>

#include "supervisor/lifecycle/restart_policy.hpp"

using namespace comfy::supervisor;
using namespace std::chrono_literals;

TEST_CASE("backoff doubles from the initial delay up to the cap") {
    RestartTracker tracker(RestartPolicy{100ms, 500ms, 10, 60s});
    const auto t0 = RestartTracker::Clock::time_point{} + 1h;
    std::vector<long> delays;
    for (int i = 0; i < 6; ++i) delays.push_back(tracker.on_death(t0 + i * 1s).delay.count());
    CHECK(delays == std::vector<long>{100, 200, 400, 500, 500, 500});
    CHECK(tracker.restarts() == 6);
}

TEST_CASE("more restarts than the limit inside the window gives up") {
    RestartTracker tracker(RestartPolicy{100ms, 30s, 5, 60s});
    const auto t0 = RestartTracker::Clock::time_point{} + 1h;
    for (int i = 0; i < 5; ++i) CHECK_FALSE(tracker.on_death(t0 + i * 1s).give_up);
    CHECK(tracker.on_death(t0 + 6s).give_up);
    CHECK(tracker.restarts() == 5);
}

TEST_CASE("deaths older than the window are forgotten, and the backoff starts over") {
    RestartTracker tracker(RestartPolicy{100ms, 30s, 2, 10s});
    const auto t0 = RestartTracker::Clock::time_point{} + 1h;
    CHECK(tracker.on_death(t0).delay == 100ms);
    CHECK(tracker.on_death(t0 + 1s).delay == 200ms);
    const auto later = tracker.on_death(t0 + 30s);
    CHECK_FALSE(later.give_up);
    CHECK(later.delay == 100ms);
}

TEST_CASE("a limit of zero fails at the first death, and reset gives the pack another chance") {
    RestartTracker tracker(RestartPolicy{100ms, 30s, 0, 60s});
    const auto t0 = RestartTracker::Clock::time_point{} + 1h;
    CHECK(tracker.on_death(t0).give_up);
    tracker.reset();
    CHECK(tracker.on_death(t0 + 1s).give_up);
}

TEST_CASE("whether a death gives up is known before it is recorded, and is what recording it decides") {
    RestartTracker tracker(RestartPolicy{100ms, 30s, 2, 10s});
    const auto t0 = RestartTracker::Clock::time_point{} + 1h;
    for (const auto at : {t0, t0 + 1s, t0 + 2s, t0 + 3s, t0 + 20s}) {
        const bool foreseen = tracker.gives_up_at(at);
        CHECK(tracker.gives_up_at(at) == foreseen);  // asking records nothing
        CHECK(tracker.on_death(at).give_up == foreseen);
    }
    // Two restarts within the window, the third death gives up; past the window it does not.
    RestartTracker fresh(RestartPolicy{100ms, 30s, 2, 10s});
    CHECK_FALSE(fresh.on_death(t0).give_up);
    CHECK_FALSE(fresh.on_death(t0 + 1s).give_up);
    CHECK(fresh.gives_up_at(t0 + 2s));
    CHECK_FALSE(fresh.gives_up_at(t0 + 12s));
}
