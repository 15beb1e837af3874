// Packs that share a type, end to end: tests/packs/group_maker makes a SHARED_THING (an
// object of its own class) that tests/packs/group_taker's node uses. Run as one group, one
// config entry whose "pack" lists both folders, they share a worker and the object passes
// between them as within one pack; run as two packs, it stays in its maker's worker and the
// crossing fails in one line that says to group them (tests/host/group_checks.py).
#include <catch2/catch.hpp>

#include "tests/python/bridge_checks_run.hpp"
#include "tests/support/supervisor_process.hpp"

using namespace comfy;
using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

TEST_CASE("a group's packs share one worker: one pack's node's object is another's node's input as it is") {
    const auto log = run_checks({"group"}, json::array({pack_group("group", {"group_maker", "group_taker"})}));
    // One worker, one life: both packs' nodes in it.
    CHECK(count_of(log, "group: spawned pid") == 1);
    CHECK_THAT(log, Contains("group: pack_worker: group_maker + group_taker: 2 node classes: MakeSharedThing, "
                             "ReadSharedThing"));
}

TEST_CASE("the same two packs apart: the object stays in its maker's worker, and the crossing says to group them") {
    run_checks({"group-apart"},
               json::array({python_pack("maker", "group_maker"), python_pack("taker", "group_taker")}));
}
