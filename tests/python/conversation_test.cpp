// A pack's worker in a conversation with a node of the host's prompt, end to end: a live
// supervisor, the host (tests/host/bridge_checks.py's conversation-* checks,
// conversation_checks.py) and tests/packs/model_pack in a worker of its own. The host's
// node uses the pack's control net again and again, pausing longer than the worker's
// IDLE_AFTER_S between uses as a GPU sampler's steps do: the worker is busy in a callback
// from the first use to the node's end, one stretch (before, each use began one), and
// idle after it; a host that dies in the middle of such a node leaves it idle too.
#include <catch2/catch.hpp>

#include "tests/python/bridge_checks_run.hpp"
#include "tests/support/supervisor_process.hpp"

#include <filesystem>
#include <fstream>

using namespace comfy;
using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

std::string workers_row(const SupervisorProcess& supervisor, const std::string& pack) {
    return row_of(run_and_capture(comfyctl_binary() + " --instance " + supervisor.instance() + " workers").output, pack);
}

// Waits for the checks to end, then reads `pack`'s row while the supervisor still runs.
std::string row_once_done(const SupervisorProcess& supervisor, const std::string& pack) {
    REQUIRE(eventually([&] { return supervisor.log().find("bridge_checks: checks done") != std::string::npos; },
                       std::chrono::seconds(120)));
    return workers_row(supervisor, pack);
}

}  // namespace

TEST_CASE("a host node that uses a pack's control net again and again, pausing past IDLE_AFTER_S between uses, keeps its worker busy in one callback stretch that ends with the node") {
    TempFolder folder("conversation");
    const auto seen = folder.path() / "seen";
    const std::vector<std::string> checks{"conversation-held:" + seen.string()};
    SupervisorProcess supervisor(config_checking(checks, json::array({python_pack("model", "model_pack")}),
                                                 json::object()));
    // The host says when its node has made its uses and still runs; the worker is then busy
    // in a callback, though the last use was answered a while ago.
    REQUIRE(eventually([&] { return supervisor.log().find("conversation-held: pack model is in") != std::string::npos; },
                       std::chrono::seconds(120)));
    std::string row;
    const bool in_callback = eventually(
        [&] {
            row = workers_row(supervisor, "model");
            return row.find("busy (callback, ") != std::string::npos;
        },
        std::chrono::seconds(30));
    std::ofstream(seen) << "seen\n";
    INFO(row);
    CHECK(in_callback);
    const auto after = row_once_done(supervisor, "model");
    INFO(after);
    CHECK(after.find("busy") == std::string::npos);
    finish_checks(supervisor, checks);
}

TEST_CASE("a host that dies in the middle of a node's conversation with a pack leaves the pack's worker idle, in the same life") {
    const std::vector<std::string> checks{"conversation-killed"};
    SupervisorProcess supervisor(config_checking(checks, json::array({python_pack("model", "model_pack")}),
                                                 json::object()));
    const auto row = row_once_done(supervisor, "model");
    INFO(row);
    CHECK(row.find("busy") == std::string::npos);
    const auto log = finish_checks(supervisor, checks);
    CHECK_THAT(log, Contains("conversation-killed: this life ends in its node's conversation with pack model"));
}
