// What a worker holds between nodes, and which release frees what: the node boundary that
// node's, the epoch boundary earlier prompts', a full release all; partial releases and
// pin releases take from them too. And the pack-file keys that describe them.
#include <catch2/catch.hpp>

#include "supervisor/memory/release_totals.hpp"
#include "tests/support/supervisor_process.hpp"
#include "worker/node_leftovers.hpp"
#include "worker/pack_description.hpp"

using namespace comfy;
using comfy::worker::NodeLeftovers;
using Catch::Matchers::Contains;

TEST_CASE("a node's cast buffer grows to the largest cast it needed, and growth is what the device must add") {
    NodeLeftovers held;
    CHECK(held.growth(1, 0, {kGiB, 0}).cast == kGiB);
    held.add(1, 0, {kGiB, 0});
    CHECK(held.growth(1, 0, {512 * kMiB, 0}).cast == 0);  // reused, not stacked
    CHECK(held.growth(1, 0, {2 * kGiB, 0}).cast == kGiB);
    CHECK(held.growth(1, 1, {512 * kMiB, 0}).cast == 512 * kMiB);  // another node: its own buffer
}

TEST_CASE("each release takes exactly what upstream's executor would free") {
    NodeLeftovers held;
    held.add(1, 0, {kGiB, 64 * kMiB});
    held.add(1, 2, {256 * kMiB, 0});
    held.add(2, 0, {512 * kMiB, 32 * kMiB});
    held.add(3, 1, {128 * kMiB, 0});
    SECTION("the node boundary: that node's, nothing else") {
        const auto taken = held.take_node(1, 0);
        CHECK(taken.cast == kGiB);
        CHECK(taken.pins == 64 * kMiB);
        CHECK(held.take_node(1, 0).cast == 0);  // a second boundary finds nothing
        CHECK(held.total().cast == 896 * kMiB);
    }
    SECTION("the epoch boundary: every node of earlier prompts, none of this one's") {
        const auto taken = held.take_before(3);
        CHECK(taken.cast == kGiB + 256 * kMiB + 512 * kMiB);
        CHECK(taken.pins == 96 * kMiB);
        CHECK(held.total().cast == 128 * kMiB);
        CHECK(held.take_before(3).cast == 0);
    }
    SECTION("a full release: everything") {
        CHECK(held.take_all().cast == kGiB + 896 * kMiB);
        CHECK(held.total().cast == 0);
        CHECK(held.total().pins == 0);
    }
    SECTION("a partial release: whole buffers, oldest first, until the bytes asked") {
        CHECK(held.take_cast(kGiB + 1) == kGiB + 256 * kMiB);
        CHECK(held.total().cast == 640 * kMiB);
        CHECK(held.total().pins == 96 * kMiB);  // the pins stay
    }
    SECTION("a pin release: patch pins, oldest first, to the byte") {
        CHECK(held.take_pins(80 * kMiB) == 80 * kMiB);
        CHECK(held.total().pins == 16 * kMiB);
        CHECK(held.total().cast == kGiB + 896 * kMiB);
    }
}

TEST_CASE("pack files describe cast buffers, patch pins and the node-boundary choice") {
    test::TempFolder folder("pack");
    const auto good = folder.write("good.json", R"({"node_boundary_release": false, "nodes": {"sample":
        [{"op": "compute", "ms": 5, "cast_buffer": "2GiB", "patch_pins": "256MiB"}]}})");
    const auto pack = worker::load_pack_description(good.string());
    CHECK_FALSE(pack.node_boundary_release);
    const auto& step = pack.nodes.at("sample").at(0);
    CHECK(step.cast_buffer == 2 * kGiB);
    CHECK(step.patch_pins == 256 * kMiB);
    CHECK(worker::load_pack_description(folder.write("default.json", R"({"nodes": {"n": [{"op": "compute", "ms": 1}]}})").string())
              .node_boundary_release);

    const auto misplaced = folder.write("bad.json", R"({"nodes": {"n": [{"op": "load_model", "model": "m",
        "bytes": "1GiB", "cast_buffer": "1GiB"}]}})");
    CHECK_THROWS_WITH(worker::load_pack_description(misplaced.string()),
                      Contains("at /nodes/n/0/cast_buffer: expected cast_buffer only in a compute step"));
    const auto not_bool = folder.write("flag.json", R"({"node_boundary_release": "yes", "nodes": {"n": [{"op": "compute", "ms": 1}]}})");
    CHECK_THROWS_WITH(worker::load_pack_description(not_bool.string()),
                      Contains("at /node_boundary_release: expected true or false"));
}

TEST_CASE("the supervisor counts releases by kind and names a load that fits only thanks to a boundary release") {
    supervisor::ReleaseTotals totals;
    ReleaseReceipt node{};
    node.release_type = static_cast<std::uint16_t>(MessageType::release_node_boundary);
    node.bytes_freed = 2 * kGiB;
    ReleaseReceipt pins{};
    pins.release_type = static_cast<std::uint16_t>(MessageType::release_pins);
    pins.bytes_freed = kGiB;
    constexpr Bytes kDevice = 24 * kGiB;
    CHECK(totals.record(3, node, kDevice)->kind == supervisor::ReleaseKind::node_boundary);
    ReleaseReceipt smaller = node;
    smaller.bytes_freed = kGiB;
    CHECK(totals.record(3, smaller, kDevice)->kind == supervisor::ReleaseKind::node_boundary);
    CHECK(totals.record(3, pins, kGiB)->kind == supervisor::ReleaseKind::pins);
    ReleaseReceipt stray{};
    stray.release_type = static_cast<std::uint16_t>(MessageType::hello);
    CHECK_FALSE(totals.record(3, stray, kDevice));
    CHECK(totals.counts()[0].freed == 3 * kGiB);
    CHECK(totals.counts()[0].receipts == 2);
    CHECK(supervisor::total_freed(totals.counts()) == 4 * kGiB);
    CHECK(totals.refused().beyond_bound == 0);
    // Only boundary releases count toward the next load, the largest one; taking starts again.
    CHECK(totals.take_boundary_freed(3) == 2 * kGiB);
    CHECK(totals.take_boundary_freed(3) == 0);

    CHECK(supervisor::fit_by_boundary_release("video", kGiB, 2 * kGiB, 3 * kGiB, 2 * kGiB).has_value());
    CHECK_FALSE(supervisor::fit_by_boundary_release("video", kGiB, 2 * kGiB, 5 * kGiB, 2 * kGiB));  // fits anyway
    CHECK_FALSE(supervisor::fit_by_boundary_release("video", kGiB, 4 * kGiB, 3 * kGiB, 2 * kGiB));  // short anyway
}
