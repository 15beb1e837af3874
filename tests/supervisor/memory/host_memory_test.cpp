// Host RAM budgeting, the pure rules: how much of a pin to grant, what a configured budget
// has left once the participants' pins and resident sets are counted, and how a pin
// release is spread over the holders.
#include <catch2/catch.hpp>

#include "supervisor/memory/host_memory.hpp"

using namespace comfy;
using namespace comfy::supervisor;

TEST_CASE("a pin is granted down to the low-water mark and no further") {
    CHECK(pin_grant(2 * kGiB, 10 * kGiB, 2 * kGiB) == 2 * kGiB);
    CHECK(pin_grant(12 * kGiB, 10 * kGiB, 2 * kGiB) == 8 * kGiB);
    CHECK(pin_grant(kGiB, 2 * kGiB, 2 * kGiB) == 0);
    CHECK(pin_grant(kGiB, kGiB, 2 * kGiB) == 0);
}

TEST_CASE("a configured budget counts each participant's resident set, or its pins where larger") {
    const std::vector<HostHolding> holdings{
        {1, 1, 3 * kGiB, kGiB},      // pins not yet resident (the simulated device): 3 GiB
        {2, 1, 2 * kGiB, 5 * kGiB},  // pinned pages inside a larger resident set: 5 GiB
        {3, 1, 0, 512 * kMiB},       // no pins at all: its resident set
    };
    CHECK(budget_left(16 * kGiB, holdings) == 16 * kGiB - 3 * kGiB - 5 * kGiB - 512 * kMiB);
    CHECK(budget_left(8 * kGiB, holdings) == 0);
    CHECK(budget_left(8 * kGiB, {}) == 8 * kGiB);
}

TEST_CASE("a pin release is spread in proportion to the pins, skipping small holders") {
    const std::vector<HostHolding> holders{{1, 1, 3 * kGiB}, {2, 1, kGiB}, {3, 1, 100 * kMiB}};
    const auto plan = plan_pin_releases(holders, 2 * kGiB);
    REQUIRE(plan.size() == 2);
    CHECK(plan[0].holder.slot == 1);
    CHECK(plan[0].bytes == 1536 * kMiB);
    CHECK(plan[1].holder.slot == 2);
    CHECK(plan[1].bytes == 512 * kMiB);
    SECTION("a share never exceeds what its holder has pinned") {
        const auto all = plan_pin_releases(holders, 10 * kGiB);
        REQUIRE(all.size() == 2);
        CHECK(all[0].bytes == 3 * kGiB);
        CHECK(all[1].bytes == kGiB);
    }
    CHECK(plan_pin_releases(holders, 0).empty());
    CHECK(plan_pin_releases({{3, 1, 100 * kMiB}}, kGiB).empty());
}
