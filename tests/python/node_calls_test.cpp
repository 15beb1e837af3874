// Node calls from the ComfyUI host to packs in workers of their own, end to end: a live
// supervisor, the host (tests/host/bridge_checks.py over our model of upstream) calling
// tests/packs/bridge_pack's nodes through its proxy nodes, each pack in the `python`
// form of the config, and a pack hostile to what the others hand over
// (tests/packs/arena_hostile_pack). Each check is one line of the host's ("NAME passed").
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <utility>
#include <vector>

#include "tests/python/bridge_checks_run.hpp"
#include "tests/support/sandbox_skip.hpp"
#include "tests/support/sanitizer_reports.hpp"
#include "tests/support/supervisor_process.hpp"

using namespace comfy;
using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

TEST_CASE("proxy nodes carry the pack's interface, values cross bit-exact, in place into a worker, and objects stay as handles") {
    run_checks({"interfaces", "wildcards", "values", "copies", "sent-back", "handles", "malformed", "cuda-handshake",
                "arena-idle"},
               json::array({python_pack("bridge", "bridge_pack"), python_pack("other", "bridge_pack")}));
}

TEST_CASE("an isolated node reports progress, ends at ComfyUI's interrupt, and raises as upstream would") {
    run_checks({"progress", "interrupt", "error", "oom"}, json::array({python_pack("bridge", "bridge_pack")}));
}

TEST_CASE("a pack's messages to the browser and its front-end files are the host's to serve") {
    const auto log = run_checks({"browser", "front-end"}, json::array({python_pack("bridge", "bridge_pack")}));
    CHECK_THAT(log, Contains("bridge_pack: 1 HTTP routes, served by ComfyUI and answered here"));
    CHECK(count_of(log, "bridge.binary messages to the browser are not JSON and stay in the worker") == 1);
}

TEST_CASE("a pack's HTTP routes are served by the host and answered in its worker, while its node runs and after it restarts") {
    const auto log = run_checks({"routes", "routes-during-node", "routes-limit", "routes-restart"},
                                json::array({python_pack("routes", "routes_pack")}));
    CHECK_THAT(log, Contains("routes_pack: 13 HTTP routes, served by ComfyUI and answered here"));
    CHECK_THAT(log, Contains("pack routes's route GET /routes_pack/socket opens a websocket"));
}

TEST_CASE("a worker that dies mid-node fails the node naming the signal, frees its blocks, and the next call works") {
    const auto log = run_checks({"death", "kept-output", "arena-idle"}, json::array({python_pack("bridge", "bridge_pack")}));
    CHECK_THAT(log, Contains("bridge: worker pid"));
    CHECK_THAT(log, Contains("(generation 1) killed by SIGKILL"));
}

TEST_CASE("a worker that dies mid-node and is not restarted fails the node saying so, and how to bring it back") {
    auto pack = python_pack("bridge", "bridge_pack");
    pack["restart"] = {{"max_restarts", 0}};
    const auto log = run_checks({"final-death"}, json::array({pack}));
    CHECK_THAT(log, Contains("bridge: failed:"));
}

TEST_CASE("two packs run calls at once, and one pack runs one call at a time") {
    run_checks({"parallel"}, json::array({python_pack("bridge", "bridge_pack"), python_pack("other", "bridge_pack")}));
}

TEST_CASE("a pack that fails to import is failed in the host too, and its nodes are not registered") {
    const auto log = run_checks({"failed:broken", "values"},
                                json::array({python_pack("broken", "broken_pack"), python_pack("bridge", "bridge_pack")}));
    CHECK_THAT(log, Contains("comfy-supervisor: pack broken is failed ("));
}

TEST_CASE("a pack fixed after it failed to import comes back on retry, its nodes registered without restarting ComfyUI") {
    TempFolder folder("late");
    const auto broken = folder.path() / "broken";
    std::ofstream(broken) << "the pack's import fails while this file exists\n";
    auto pack = python_pack("late", "late_pack");
    pack["env"]["LATE_PACK_BROKEN"] = broken.string();
    SupervisorProcess supervisor(config_checking({"late:late"}, json::array({pack}), json::object()));
    // Once the host has seen the failure (its check says so), not once the supervisor has: the
    // host may start after the retry otherwise, and find the pack already back.
    REQUIRE(eventually([&] { return supervisor.log().find("waiting for its retry") != std::string::npos; },
                       std::chrono::seconds(60)));
    std::filesystem::remove(broken);  // the user fixes the pack, and retries it
    const auto retried = run_and_capture(comfyctl_binary() + " --instance " + supervisor.instance() + " retry late");
    REQUIRE(retried.started);
    CHECK(retried.status == 0);
    finish_checks(supervisor, {"late:late"});
}

TEST_CASE("a node that ignores Cancel ends with its worker after the grace period, and the pack restarts at once") {
    // The default grace period: the node that only reports progress has that long to end
    // by itself, however loaded the machine.
    const auto log = run_checks({"cancel", "cancel-progress"}, json::array({python_pack("hostile", "hostile_pack")}));
    // One life ended, in one line.
    CHECK(count_of(log, "hostile: stopping pid") == 1);
    CHECK_THAT(log, Contains("hostile: stopping pid") &&
                        Contains("its node did not end within 3000 ms of ComfyUI's Cancel (node LoopForever)"));
    CHECK_THAT(log, Contains("hostile: restarting now: ComfyUI's Cancel ended its node"));
    // Not a crash: no backoff, nothing counted against the restart limit.
    CHECK(count_of(log, "hostile: restarting in") == 0);
}

TEST_CASE("a worker that breaks the call protocol is ended in one line, and the next call runs in its next life") {
    const auto log = run_checks({"protocol:oversize", "protocol:nested", "host-protocol"},
                                json::array({python_pack("hostile", "hostile_pack")}));
    CHECK(count_of(log, "hostile: stopping pid") == 2);
    CHECK_THAT(log, Contains("its call session with the host broke: it broke the call protocol (a frame of 67108865 "
                             "bytes (at most 67108864))"));
    CHECK_THAT(log, Contains("its call session with the host broke: it broke the call protocol (a frame that is not "
                             "JSON"));
    CHECK_THAT(log, !Contains("did not start within"));
    // The other way: the worker ends its own life, in one line of its own.
    CHECK(count_of(log, "hostile: pack_worker: the host broke the call protocol (a frame of 67108865 bytes (at most "
                        "67108864)); ending this life") == 1);
}

TEST_CASE("a pack's flood of messages to the browser is bounded and counted in a line or two, and its node goes on") {
    const std::vector<std::string> checks{"browser-flood:20"};
    SupervisorProcess supervisor(config_checking(checks, json::array({python_pack("hostile", "hostile_pack")}),
                                                 {{"browser_messages", {{"max_bytes", "64 KiB"}, {"per_second", 20}}}}));
    // What the host's gate counted, from the check's own line; then the host's lines of it.
    const std::regex counted("browser-flood: .* refused \\{'size': 3, 'rate': ([0-9]+), 'malformed': 0\\}");
    const std::regex said("pack hostile: refused ([0-9]+) of its messages to the browser in the last [0-9.]+ s "
                          "\\([^)]*\\), ([0-9]+) in all since it started");
    std::vector<std::pair<long, long>> lines;  // each line's count, and its count in all
    long refused = -1;
    const auto read_log = [&] {
        const auto log = supervisor.log();
        std::smatch found;
        if (std::regex_search(log, found, counted)) refused = 3 + std::stol(found[1]);
        lines.clear();
        for (std::sregex_iterator at(log.begin(), log.end(), said), end; at != end; ++at) {
            lines.emplace_back(std::stol((*at)[1]), std::stol((*at)[2]));
        }
        return refused > 0 && !lines.empty() && lines.back().second == refused;
    };
    // A line a period (a second after the flood's first refusal, then at most every 10 s),
    // each with the period's own count: together, every refusal, and not a line each.
    CHECK(eventually(read_log, std::chrono::seconds(60)));
    finish_checks(supervisor, checks);
    INFO("refused " << refused);
    REQUIRE_FALSE(lines.empty());
    CHECK(lines.size() <= 2);
    CHECK(lines.front().first > 1);  // the flood's first second, never its first refusal alone
    long sum = 0;
    for (const auto& [count, in_all] : lines) CHECK(in_all == (sum += count));
    CHECK(sum == refused);
}

TEST_CASE("a pack's values no encoder makes fail its node alone: a bool of other bytes, one block named again and again") {
    json hostile = python_pack("hostile", "hostile_pack");
    hostile["python"]["arena_bytes"] = "64 MiB";  // 16 tensors over one 16 MiB block would copy 4 times the arena
    run_checks({"bad-bool", "repeat-block"}, json::array({hostile}));
}

TEST_CASE("a sandboxed pack's HTTP routes are answered too: its routes' socket crosses the sandbox") {
    SKIP_WITHOUT_BWRAP();
    json routes = python_pack("routes", "routes_pack");
    routes["sandbox"] = json::object();
    run_checks({"routes", "routes-during-node"}, json::array({routes}));
    reap_orphans();
}

TEST_CASE("a pack's node whose interface upstream could not use is left out alone, in one line") {
    const auto log = run_checks({"bad-interface", "values"},
                                json::array({python_pack("bad", "bad_interface_pack"), python_pack("bridge", "bridge_pack")}));
    CHECK(count_of(log, "comfy-supervisor: pack bad: 2 of its 3 nodes cannot be proxied and are left out: ") == 1);
    CHECK_THAT(log, Contains("'ListInputs' (its INPUT_TYPES() is a list, not a dict of sections)"));
    CHECK_THAT(log, Contains("'NumberReturns' (its RETURN_TYPES is an int, not a list of types)"));
}

TEST_CASE("a pack's node class that cannot describe itself is left out alone, in one line naming it and the pack") {
    const auto log = run_checks({"one-bad-class", "values"},
                                json::array({python_pack("bad", "one_bad_class_pack"), python_pack("bridge", "bridge_pack")}));
    CHECK(count_of(log, "left out (ComfyUI leaves it out too)") == 1);
    CHECK(count_of(log, "bad: pack_worker: one_bad_class_pack: node class 'ListsMissingFolder' left out (ComfyUI "
                        "leaves it out too): its interface raised KeyError: ") == 1);
}

TEST_CASE("a hostile pack finds nothing the host sent another pack, and cannot change what it handed over") {
    run_checks({"snoop", "frozen", "values"},
               json::array({python_pack("bridge", "bridge_pack"), python_pack("evil", "arena_hostile_pack")}));
}

TEST_CASE("a hostile pack in a sandbox finds what the host sent another pack nowhere it can look") {
    SKIP_WITHOUT_BWRAP();
    json evil = python_pack("evil", "arena_hostile_pack");
    evil["sandbox"] = json::object();
    run_checks({"snoop:everywhere", "frozen"}, json::array({python_pack("bridge", "bridge_pack"), evil}));
    reap_orphans();
}
