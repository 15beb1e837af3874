// ComfyUI's Cancel reaching a pack's function that the host calls back, end to end: a live
// supervisor, the host (tests/host/bridge_checks.py's callback-* checks, callback_checks.py)
// and tests/packs/hostile_pack (its callbacks.py) in a worker of its own. A callback that
// never returns ends with its worker after the pack's grace period (3000 ms, the default),
// as a node does, and ComfyUI gets upstream's InterruptProcessingException; one that checks
// for interrupts hears the Cancel in its worker and ends by itself. Without the fix the
// first such check hangs, and finish_checks fails after its bound.
#include <catch2/catch.hpp>

#include "tests/python/bridge_checks_run.hpp"
#include "tests/support/supervisor_process.hpp"

#include <filesystem>
#include <fstream>

using namespace comfy;
using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

TEST_CASE("a pack's CFG function that ignores Cancel under the host's KSampler ends with its worker, in one line naming the pack") {
    const auto log = run_checks({"callback-checking", "callback-cfg"}, json::array({python_pack("hostile", "hostile_pack")}));
    INFO(log);
    // Cancel reached both callbacks, each said once; the one that checks ended by itself.
    CHECK(count_of(log, "comfy-supervisor: pack hostile: ComfyUI's Cancel reached its callback (__call__ of pack "
                        "hostile's CALLABLE (function)); it has 3000 ms to end before its worker is ended") == 2);
    CHECK(count_of(log, "hostile: stopping pid") == 1);
    CHECK_THAT(log, Contains("its callback did not end within 3000 ms of ComfyUI's Cancel (callback __call__ of pack "
                             "hostile's CALLABLE (function))"));
    CHECK_THAT(log, Contains("hostile: restarting now: ComfyUI's Cancel"));
    CHECK(count_of(log, "hostile: restarting in") == 0);  // not a crash
}

TEST_CASE("a function a pack returned, and a callback three waits deep, that ignore Cancel end with the worker, and one sitting in a callback shows so in comfyctl workers") {
    TempFolder folder("callback");
    const auto seen = folder.path() / "seen";
    const std::string shown = "callback-shown:" + seen.string();
    const std::vector<std::string> checks{"callback-returned", "callback-nested", shown};
    SupervisorProcess supervisor(config_checking(checks, json::array({python_pack("hostile", "hostile_pack")}),
                                                 json::object()));
    // The host says when the pack's function sits in its callback, and Cancels once the
    // file exists (or after its own bound, so that this test fails rather than hangs).
    REQUIRE(eventually([&] { return supervisor.log().find("callback-shown: pack hostile sits") != std::string::npos; },
                       std::chrono::seconds(120)));
    const std::string workers = comfyctl_binary() + " --instance " + supervisor.instance() + " workers";
    std::string row;
    std::string as_json;
    const bool in_callback = eventually(
        [&] {
            const auto table = run_and_capture(workers);
            row = row_of(table.output, "hostile");
            as_json = run_and_capture(workers + " --json").output;
            return row.find("busy (callback, ") != std::string::npos;
        },
        std::chrono::seconds(30));
    std::ofstream(seen) << "seen\n";
    INFO(row);
    INFO(as_json);
    CHECK(in_callback);
    // --json says the same, with since when.
    const auto parsed = json::parse(as_json, nullptr, false);
    bool said = false;
    if (parsed.is_object() && parsed.contains("workers") && parsed["workers"].is_array()) {
        for (const auto& worker : parsed["workers"]) {
            const auto since = worker.value("busy_since_ms", json());
            said = said || (worker.value("name", json()) == "hostile" && worker.value("in_callback", json()) == true &&
                            since.is_number_unsigned() && since.get<std::uint64_t>() > 0);
        }
    }
    CHECK(said);

    const auto log = finish_checks(supervisor, checks);
    INFO(log);
    CHECK(count_of(log, "hostile: stopping pid") == 3);
    CHECK(count_of(log, ": its callback did not end within 3000 ms of ComfyUI's Cancel") == 2);
    // Three waits deep (the pack's node, the host's sampler, the pack's CFG function): the
    // node the host waits on outran the Cancel, and every wait ended with its life.
    CHECK_THAT(log, Contains("its node did not end within 3000 ms of ComfyUI's Cancel (node SampleForever)"));
}
