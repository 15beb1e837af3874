// Waiting at start for a GPU whose driver is still loading. There is no GPU to bring up
// late here, so the wait is driven through its probe, the seam that production fills with
// probe_cuda_in_child: a probe that finds the device on its Nth try stands for a driver
// that finished loading meanwhile. The child probe itself runs for real, against whatever
// this machine has, and must agree with the CUDA runtime asked in this process.
#include <catch2/catch.hpp>

#include "supervisor/memory/supervised_device.hpp"
#include "worker/device_factory.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

using namespace comfy::supervisor;
using std::chrono::milliseconds;

namespace {

// Fails `failures` times with a numbered reason, then finds the device.
struct LateDevice {
    int failures;
    int tries = 0;
    std::optional<std::string> operator()() {
        ++tries;
        if (tries > failures) return std::nullopt;
        return "not yet (" + std::to_string(tries) + ")";
    }
};

constexpr DeviceWaitBackoff kQuick{milliseconds(1), milliseconds(4)};

}  // namespace

TEST_CASE("a device that comes on the fourth try is waited for, each failed try told with a pause that doubles") {
    LateDevice device{3};
    std::vector<DeviceWaitStep> steps;
    const auto missing = wait_for_device(
        milliseconds(60'000), std::ref(device), [&](const DeviceWaitStep& step) { steps.push_back(step); }, kQuick);
    CHECK_FALSE(missing);
    CHECK(device.tries == 4);
    REQUIRE(steps.size() == 3);
    CHECK(steps[0].reason == "not yet (1)");
    CHECK(steps[2].reason == "not yet (3)");
    // Doubling from the first pause, up to the longest.
    CHECK(steps[0].next_try == milliseconds(1));
    CHECK(steps[1].next_try == milliseconds(2));
    CHECK(steps[2].next_try == milliseconds(4));
    CHECK(steps[2].waited >= milliseconds(3));
}

TEST_CASE("a device that never comes is tried until the wait is over, then its last reason is the answer") {
    LateDevice device{1'000'000};
    std::vector<DeviceWaitStep> steps;
    const auto missing = wait_for_device(
        milliseconds(30), std::ref(device), [&](const DeviceWaitStep& step) { steps.push_back(step); }, kQuick);
    REQUIRE(missing);
    CHECK(*missing == "not yet (" + std::to_string(device.tries) + ")");
    // Told of every try but the last; the pauses never reach past the wait's end.
    CHECK(steps.size() == static_cast<std::size_t>(device.tries - 1));
    for (const auto& step : steps) {
        CHECK(step.next_try <= kQuick.longest);
        CHECK(step.waited + step.next_try <= milliseconds(30) + milliseconds(1));
    }
}

TEST_CASE("no wait: one try") {
    LateDevice device{1};
    int told = 0;
    CHECK(wait_for_device(milliseconds(0), std::ref(device), [&](const DeviceWaitStep&) { ++told; }, kQuick));
    CHECK(device.tries == 1);
    CHECK(told == 0);
}

TEST_CASE("the probe in a child process answers what the CUDA runtime answers in this one") {
    // The children first: one forked after this process started CUDA could not use it.
    // 63: no machine this runs on has 64 GPUs.
    const auto first = probe_cuda_in_child(0);
    const auto past_the_last = probe_cuda_in_child(63);
    CHECK(past_the_last);
    CHECK(first == comfy::worker::cuda_unavailable_reason(0));
    CHECK(past_the_last == comfy::worker::cuda_unavailable_reason(63));
}
