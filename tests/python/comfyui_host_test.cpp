// comfy_supervisor.host.comfyui, the ComfyUI integration, run in the host's slot over our model
// of upstream's memory manager (tests/host/fake_comfyui) on a 24 GiB simulated device,
// beside comfy-worker workers: the ledger stays true whatever path upstream unloads by,
// the command thread survives upstream's exceptions and never races the prompt thread,
// and stand-in entries take upstream's own eviction to the other processes' models.
#include <catch2/catch.hpp>

#include "tests/support/sanitizer_reports.hpp"
#include "tests/support/supervisor_process.hpp"

#include <signal.h>

using namespace comfy;
using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

// The fake ComfyUI running `steps` (tests/host/fake_comfyui/main.py says what each does).
json fake_comfyui(const std::vector<std::string>& steps) {
    json args = json::array({FAKE_COMFYUI_MAIN});
    for (const auto& step : steps) args.push_back(step);
    return {{"command", PYTHON3_PATH},
            {"args", args},
            {"env", {{"PYTHONPATH", PARTICIPANT_PYTHONPATH}, {"PYTHONDONTWRITEBYTECODE", "1"}}}};
}

json config_with(const json& host, const json& packs) {
    json config = memory_config_of(packs);
    config["comfyui"] = host;
    return config;
}

bool holds(const SupervisorProcess& supervisor, std::uint32_t slot) {
    for (const auto& entry : supervisor.ledger()) {
        if (entry.owner_slot == slot) return true;
    }
    return false;
}

// Waits for the fake's last line, then stops the supervisor.
std::string run_to_end(SupervisorProcess& supervisor) {
    const bool finished =
        eventually([&] { return supervisor.log().find("fake_comfyui: steps done") != std::string::npos; },
                   std::chrono::seconds(60));
    INFO(supervisor.log());
    CHECK(supervisor.stop() == 0);
    REQUIRE(finished);
    return supervisor.log();
}

}  // namespace

TEST_CASE("the ComfyUI integration is admitted, reported and evicted through upstream's model_unload") {
    TempFolder packs("comfyui");
    // The asker loads once the host's second model is on the device, and so after the host
    // checked the ledger of its first: waiting for the first alone let a slow host (under
    // ThreadSanitizer) be evicted, and shut down, before it had said so.
    const json config = config_with(
        fake_comfyui({"load:model:12GiB", "load:marker:1GiB"}),
        {reference_pack(packs, "asker", {{"nodes", {{"load", {step_await_free_below("12GiB"), step_load("huge", "14GiB")}}}}}),
         reference_pack(packs, "idle", idle_pack())});
    SupervisorProcess supervisor(config, workload_of({{node("asker", "load")}}));
    CHECK(supervisor.wait() == 0);
    const auto log = supervisor.log();
    INFO(log);
    // Admitted before loading (the host's two admissions and the asker's), the model in the ledger.
    CHECK_THAT(supervisor.output(), Contains("admissions         3 ("));
    CHECK_THAT(log, Contains("fake_comfyui: ledger true after load:model:12GiB"));
    // Evicted through LoadedModel.model_unload, with the bytes it measured.
    // The host's model is named by its class, as the integration reports it (model_names.py).
    CHECK_THAT(log, Contains("asking host (slot 0, generation 1) to free") && Contains("of model 1 \"Module\" ("));
    CHECK(census_figure(supervisor.output(), "asker", 0) == 14 * kGiBf);
    const double held = census_figure(supervisor.output(), "host", 0);
    CHECK(held > 0);
    CHECK(held + 14 * kGiBf <= 24 * kGiBf);
    CHECK_THAT(supervisor.output(), Contains("prompts run        1 of 1 (0 failed)"));
}

TEST_CASE("ComfyUI runs supervised before any pack is isolated: with no pack, its loads are admitted and in the ledger") {
    SupervisorProcess supervisor(config_with(fake_comfyui({"load:a:2GiB", "unload-all"}), json::array()));
    const auto log = run_to_end(supervisor);
    CHECK_THAT(log, Contains("fake_comfyui: ledger true after load:a:2GiB in "));
    CHECK_THAT(log, Contains("fake_comfyui: ledger true after unload-all in "));
}

TEST_CASE("every path upstream unloads the host's models by reaches the ledger, and a CPU model never enters it") {
    TempFolder packs("comfyui");
    // a is partially unloaded by a node's own call, b by unload_model_and_clones, c by its
    // finalizer (cleanup_models), a's rest by free_memory (the most offloaded goes first),
    // d and e by unload_all_models (POST /free); t lives on the CPU throughout.
    const std::vector<std::string> steps{"load:a:2GiB",      "load:b:2GiB",     "load:c:2GiB", "load:d:2GiB",
                                         "load:e:2GiB:p=1GiB", "load-cpu:t:1GiB", "partial:a:1GiB",
                                         "unload-clones:b",  "drop:c",          "free:19GiB",  "unload-all"};
    SupervisorProcess supervisor(config_with(fake_comfyui(steps), json::array({reference_pack(packs, "idle", idle_pack())})));
    const auto log = run_to_end(supervisor);
    for (const auto& step : steps) {
        INFO(step);
        CHECK_THAT(log, Contains("fake_comfyui: ledger true after " + step + " in "));
    }
    CHECK_THAT(log, !Contains("ledger stale"));
    // The patch model came with e's load (upstream adds model_patches_models), and left.
    CHECK_THAT(log, Contains("steps done; list: t on cpu (1073741824 loaded); host rows in the ledger: 0; "
                             "device used by the host: 0"));
}

TEST_CASE("the host's looks at a ledger that stands still return what it read, and a change is read") {
    TempFolder packs("comfyui");
    const std::vector<std::string> steps{"load:a:2GiB", "ledger-looks", "load:b:2GiB", "ledger-looks"};
    SupervisorProcess supervisor(config_with(fake_comfyui(steps), json::array({reference_pack(packs, "idle", idle_pack())})));
    const auto log = run_to_end(supervisor);
    INFO(log);
    CHECK_THAT(log, Contains("ledger looked at twice: the same tuple True, 1 row(s)"));
    CHECK_THAT(log, Contains("ledger looked at twice: the same tuple True, 2 row(s)"));
}

TEST_CASE("an exception from upstream during an eviction is answered as nothing freed and the thread goes on") {
    TempFolder packs("comfyui");
    // b cannot be unloaded, and is asked before a (as recent and as large, loaded later);
    // the asker's load then takes a's bytes. c's load says b's unloads fail by now: the
    // asker must not ask before (free memory went below 9 GiB with b's load already). It
    // says too that no prompt runs in the host: loaded by a prompt, c let an asker that
    // came before the prompt's end find the host busy, its evictions deferred.
    const json config = config_with(
        fake_comfyui({"load:a:8GiB", "load:b:8GiB", "fail-unload:b", "load-between-prompts:c:512MiB"}),
        json::array({reference_pack(packs, "asker",
                                    {{"nodes", {{"load", {step_await_free_below("8GiB"), step_load("huge", "14GiB")}}}}})}));
    SupervisorProcess supervisor(config, workload_of({{node("asker", "load")}}));
    CHECK(supervisor.wait() == 0);
    const auto log = supervisor.log();
    INFO(log);
    CHECK(count_of(log, "comfy-supervisor: an eviction failed: RuntimeError: b cannot be unloaded") == 1);
    CHECK(census_figure(supervisor.output(), "asker", 0) == 14 * kGiBf);
    CHECK(census_figure(supervisor.output(), "host", 0) <= 10 * kGiBf);
}

TEST_CASE("unload_all_models on the prompt thread during an eviction leaves one consistent result") {
    TempFolder packs("comfyui");
    // The eviction of a runs on the command thread for half a second; unload_all_models
    // starts meanwhile and waits for it, then acts on what is left. The asker loads once a
    // is on the device, and a second later, so that the host's next step (making a's
    // unloads slow, at once) came first: ask sooner and the eviction is over before the
    // host waits for it.
    const json config = config_with(
        fake_comfyui({"load:a:12GiB", "slow-unload:a:500", "unload-all-during-eviction:a"}),
        {reference_pack(packs, "asker",
                        {{"nodes", {{"load", {step_await_free_below("13GiB"), step_compute(1000), step_load("huge", "14GiB")}}}}}),
         reference_pack(packs, "clock", {{"nodes", {{"wait", {step_compute(6000)}}}}})});
    SupervisorProcess supervisor(config, workload_of({{node("asker", "load"), node("clock", "wait")}}));
    CHECK(supervisor.wait() == 0);
    const auto log = supervisor.log();
    INFO(log);
    CHECK_THAT(log, Contains("fake_comfyui: ledger true after unload-all-during-eviction:a in "));
    CHECK_THAT(log, Contains("host rows in the ledger: 0; device used by the host: 0"));
    CHECK_THAT(log, !Contains("failed:"));
    // The asker's load went ahead. (Whether unload_all_models then took its model too,
    // through its stand-in, depends on which came first: both are right.)
    CHECK_THAT(supervisor.output(), Contains("prompts run        1 of 1 (0 failed)"));
}

TEST_CASE("unload_all_models in the host detaches a worker's model through its stand-in") {
    TempFolder packs("comfyui");
    const json config = config_with(
        fake_comfyui({"wait-standins:1", "unload-all", "wait-standins:0"}),
        {reference_pack(packs, "holder", {{"nodes", {{"load", {step_load("w", "4GiB")}}}}}),
         reference_pack(packs, "clock", {{"nodes", {{"wait", {step_compute(6000)}}}}})});
    SupervisorProcess supervisor(config, workload_of({{node("holder", "load"), node("clock", "wait")}}));
    const bool done = eventually(
        [&] { return supervisor.log().find("fake_comfyui: steps done") != std::string::npos; }, std::chrono::seconds(30));
    INFO(supervisor.log());
    REQUIRE(done);
    // The ledger has let it go before the workload ends; then the holder's census and the
    // summary agree with it.
    CHECK_FALSE(holds(supervisor, 1));
    CHECK(supervisor.wait() == 0);
    const auto log = supervisor.log();
    INFO(log);
    CHECK_THAT(log, Contains("the host's eviction reached the stand-in of model 1 \"w\" of holder (slot 1, generation "
                             "1): asking its owner to detach it (4.0 GiB loaded)"));
    CHECK(census_figure(supervisor.output(), "holder", 0) == 0);
    CHECK_THAT(supervisor.output(), Contains("4.0 GiB freed (measured by the owners)"));
}

TEST_CASE("unload_all_models over the stand-in of a busy owner goes on at once, and the owner detaches at its boundary") {
    TempFolder packs("comfyui");
    // The holder's node loads its model (20 GiB free after it) and runs on until the host's
    // load after unload_all_models (18 GiB free): it is busy when unload_all_models reaches
    // the stand-in, however slow either process is. Upstream's loop is answered at once (it
    // used to wait out the answer time-out with the host's lock held), and the detach runs
    // when the holder's node ends.
    // The detach comes after that node's result, so the census read as the workload ends
    // shows it only if the workload ends later: the holder's second node is queued behind
    // the detach in its inbox (the supervisor sent the detach while the first node ran),
    // and the workload ends with it. Ending with the first node left the census to
    // whichever came first under load, the detach or the supervisor's read.
    const json config =
        config_with(fake_comfyui({"wait-standins:1", "unload-all", "load:marker:2GiB"}),
                    json::array({reference_pack(packs, "holder",
                                                {{"nodes",
                                                  {{"load", {step_load("w", "4GiB"), step_await_free_below("19GiB")}},
                                                   {"after", {step_compute(1)}}}}})}));
    SupervisorProcess supervisor(config, workload_of({{node("holder", "load"), node("holder", "after")}}));
    CHECK(supervisor.wait() == 0);
    const auto log = supervisor.log();
    INFO(log);
    CHECK_THAT(log, Contains("stand-in unload of model 1 \"w\" of holder (slot 1, generation 1) answered as deferred: "
                             "its owner is busy and runs it at its next boundary"));
    CHECK_THAT(log, Contains("fake_comfyui: ledger true after unload-all in "));
    CHECK_THAT(log, !Contains("not answered by their owner"));
    CHECK(census_figure(supervisor.output(), "holder", 0) == 0);
}

TEST_CASE("upstream's free_memory in the host evicts other processes' models in upstream's order") {
    TempFolder packs("comfyui");
    // 13 GiB free and 16 asked: upstream's sort puts the smaller model first, and freeing
    // it is enough, so the larger one stays.
    const json config = config_with(
        fake_comfyui({"wait-standins:2", "free:16GiB", "wait-standins:1"}),
        {reference_pack(packs, "small", {{"nodes", {{"load", {step_load("s", "3GiB")}}}}}),
         reference_pack(packs, "large", {{"nodes", {{"load", {step_load("l", "8GiB")}}}}}),
         reference_pack(packs, "clock", {{"nodes", {{"wait", {step_compute(6000)}}}}})});
    SupervisorProcess supervisor(
        config, workload_of({{node("small", "load"), node("large", "load"), node("clock", "wait")}}));
    CHECK(supervisor.wait() == 0);
    const auto log = supervisor.log();
    INFO(log);
    CHECK_THAT(log,
               Contains("the host's eviction reached the stand-in of model 1 \"s\" of small (slot 1, generation 1)"));
    CHECK_THAT(log, !Contains("of large (slot 2, generation 1)"));
    CHECK(census_figure(supervisor.output(), "small", 0) == 0);
    CHECK(census_figure(supervisor.output(), "large", 0) == 8 * kGiBf);
}

TEST_CASE("a host load that needs a worker's memory is made room for once, by the supervisor's admission") {
    TempFolder packs("comfyui");
    const json config = config_with(
        fake_comfyui({"wait-standins:1", "load:big:14GiB"}),
        {reference_pack(packs, "holder", {{"nodes", {{"load", {step_load("w", "12GiB")}}}}}),
         reference_pack(packs, "clock", {{"nodes", {{"wait", {step_compute(6000)}}}}})});
    SupervisorProcess supervisor(config, workload_of({{node("holder", "load"), node("clock", "wait")}}));
    CHECK(supervisor.wait() == 0);
    const auto log = supervisor.log();
    INFO(log);
    CHECK_THAT(log, Contains("memory: host (slot 0) needs"));
    CHECK_THAT(log, Contains("asking holder (slot 1, generation 1) to free"));
    // Upstream's free_memory inside the load saw no stand-in: nothing asked twice.
    CHECK_THAT(log, !Contains("reached the stand-in"));
    CHECK_THAT(log, Contains("fake_comfyui: ledger true after load:big:14GiB"));
    CHECK(census_figure(supervisor.output(), "host", 0) == 14 * kGiBf);
}

TEST_CASE("the stand-in of a model whose owner died is named as the supervisor names it, reports itself freed "
          "and raises nothing") {
    TempFolder packs("comfyui");
    const json config = config_with(fake_comfyui({"wait-standins:1", "keep-standin"}),
                                    {reference_pack(packs, "holder", {{"nodes", {{"load", {step_load("w", "4GiB")}}}}}),
                                     reference_pack(packs, "clock", {{"nodes", {{"wait", {step_compute(8000)}}}}})});
    SupervisorProcess supervisor(config, workload_of({{node("holder", "load"), node("clock", "wait")}}));
    REQUIRE(eventually([&] { return supervisor.log().find("holding the stand-in of") != std::string::npos; },
                       std::chrono::seconds(30)));
    // The model's name and its owner's pack, read by the library from the ledger's row and
    // the participant table (the reference worker names a model as its pack file does).
    CHECK_THAT(supervisor.log(), Contains("holding the stand-in of \"w\" (model 1 of pack holder)"));
    const auto holder = supervisor.participant("holder");
    REQUIRE(holder);
    REQUIRE(::kill(holder->pid, SIGKILL) == 0);
    CHECK(supervisor.wait() == 0);
    CHECK_THAT(supervisor.log(), Contains("fake_comfyui: dead owner's stand-in: model_unload returned True, 0 bytes left"));
}

TEST_CASE("the stand-in has exactly the members of its surface table, and its label names the model as the "
          "supervisor does") {
    const auto run = run_and_capture("env " + sanitizer_python_environment() + "PYTHONPATH=" + PARTICIPANT_PYTHONPATH +
                                     " PYTHONDONTWRITEBYTECODE=1 " + PYTHON3_PATH + " " + STANDIN_SURFACE_CHECK +
                                     " 2>&1");
    REQUIRE(run.started);
    INFO(run.output);
    CHECK(run.status == 0);
    CHECK_THAT(run.output,
               Contains("standin surface: 17 members, all present, nothing else; labels as the supervisor's"));
}
