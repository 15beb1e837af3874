// The log limiter with a clock the test moves: the first lines of a window pass, the rest
// are counted, and the window's end brings one summary line.
#include <catch2/catch.hpp>

#include "supervisor/ops/log/log_limiter.hpp"

using namespace comfy::supervisor;
using Catch::Matchers::Equals;
using namespace std::chrono_literals;

namespace {
using Lines = std::vector<std::string>;
const LogLimiter::Clock::time_point t0{};
}  // namespace

TEST_CASE("the first lines of a window pass and the rest are counted into one summary at its end") {
    LogLimiter limiter(3, 10s);
    for (int i = 0; i < 3; ++i) {
        CHECK_THAT(limiter.pass("flooder", "untracked models", "line " + std::to_string(i), t0 + i * 1ms),
                   Equals(Lines{"line " + std::to_string(i)}));
    }
    for (int i = 0; i < 15'907; ++i) CHECK(limiter.pass("flooder", "untracked models", "more", t0 + 5s).empty());
    CHECK(limiter.ended(t0 + 9999ms).empty());
    CHECK_THAT(limiter.ended(t0 + 10s),
               Equals(Lines{"flooder: 15907 more lines like this suppressed in the last 10 s (untracked models)"}));
    // The window is gone with its summary: nothing more to say, and the next line passes.
    CHECK(limiter.ended(t0 + 30s).empty());
    CHECK_THAT(limiter.pass("flooder", "untracked models", "again", t0 + 31s), Equals(Lines{"again"}));
}

TEST_CASE("a line after the window ended brings the summary first, then opens a new window") {
    LogLimiter limiter(1, 10s);
    CHECK(limiter.pass("a", "pin cuts", "first", t0).size() == 1);
    CHECK(limiter.pass("a", "pin cuts", "second", t0 + 1s).empty());
    CHECK_THAT(limiter.pass("a", "pin cuts", "third", t0 + 10s),
               Equals(Lines{"a: 1 more line like this suppressed in the last 10 s (pin cuts)", "third"}));
    CHECK(limiter.pass("a", "pin cuts", "fourth", t0 + 19s).empty());
}

TEST_CASE("participants and topics have windows of their own") {
    LogLimiter limiter(1, 10s);
    CHECK(limiter.pass("a", "pin cuts", "a pin", t0).size() == 1);
    CHECK(limiter.pass("a", "pin cuts", "a pin again", t0).empty());
    CHECK(limiter.pass("b", "pin cuts", "b pin", t0).size() == 1);
    CHECK(limiter.pass("a", "untracked models", "a model", t0).size() == 1);
}

TEST_CASE("a window that let every line through ends without a summary") {
    LogLimiter limiter(2, 10s);
    CHECK(limiter.pass("a", "pin cuts", "one", t0).size() == 1);
    CHECK(limiter.pass("a", "pin cuts", "two", t0).size() == 1);
    CHECK(limiter.ended(t0 + 10s).empty());
}

TEST_CASE("flush says what every open window left out") {
    LogLimiter limiter(1, 10s);
    limiter.pass("a", "pin cuts", "one", t0);
    limiter.pass("a", "pin cuts", "two", t0);
    limiter.pass("b", "pin cuts", "one", t0);
    CHECK_THAT(limiter.flush(), Equals(Lines{"a: 1 more line like this suppressed in the last 10 s (pin cuts)"}));
    CHECK(limiter.flush().empty());
}
