// Memory arbitration across real processes on a 24 GiB simulated device: cross-process
// eviction, an owner killed during its eviction, a busy owner deferred to its boundary,
// pin pressure released in proportion, and each no-fit policy.
#include <catch2/catch.hpp>

#include "tests/support/supervisor_process.hpp"

#include <signal.h>

#include <cstdlib>

using namespace comfy;
using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

json step_pin(const std::string& bytes) { return {{"op", "pin"}, {"bytes", bytes}}; }

}  // namespace

TEST_CASE("a load that needs another worker's model evicted succeeds, and that worker really freed its bytes") {
    TempFolder packs("mem");
    const json config = memory_config_of({reference_pack(packs, "holder", {{"nodes", {{"load", {step_load("big", "12GiB")}}}}}),
                                   reference_pack(packs, "asker", {{"nodes", {{"load", {step_load("huge", "14GiB")}}}}})});
    SupervisorProcess supervisor(config, workload_of({{node("holder", "load"), node("asker", "load")}}));
    CHECK(supervisor.wait() == 0);
    CHECK_THAT(supervisor.output(), Contains("prompts run        1 of 1 (0 failed)"));
    // The memory decision names the owner and its model, as the pack file does.
    CHECK_THAT(supervisor.log(), Contains("asking holder (slot 1, generation 1) to free") &&
                                     Contains("of model 1 \"big\" ("));
    // The asker holds its 14 GiB; the holder kept what the eviction left it.
    CHECK(census_figure(supervisor.output(), "asker", 0) == 14 * kGiBf);
    const double held = census_figure(supervisor.output(), "holder", 0);
    CHECK(held > 0);
    CHECK(held < 8 * kGiBf);
    CHECK(held + 14 * kGiBf <= 24 * kGiBf);
}

TEST_CASE("an owner killed during its eviction counts as freed and the load proceeds") {
    TempFolder packs("mem");
    const json config = memory_config_of(
        {reference_pack(packs, "holder", {{"nodes", {{"load", {step_load("big", "12GiB")}}}}}),
         reference_pack(packs, "asker", {{"nodes", {{"late_load", {step_compute(300), step_load("huge", "14GiB")}}}}})},
        {{"answer_timeout_ms", 60000}});
    SupervisorProcess supervisor(config, workload_of({{node("holder", "load"), node("asker", "late_load")}}));
    // Once the asker's node started, the holder's load is done: stop the holder so it
    // cannot answer the eviction, then kill it while the arbiter waits for it.
    REQUIRE(supervisor.wait_for_state("asker", ParticipantState::busy));
    const auto holder = *supervisor.participant("holder");
    REQUIRE(::kill(holder.pid, SIGSTOP) == 0);
    REQUIRE(eventually(
        [&] { return supervisor.log().find("asking holder (slot 1, generation 1) to free") != std::string::npos; },
                       std::chrono::seconds(10)));
    REQUIRE(::kill(holder.pid, SIGKILL) == 0);
    CHECK(supervisor.wait() == 0);
    CHECK_THAT(supervisor.log(), Contains("died during its eviction; its entries count as freed"));
    CHECK_THAT(supervisor.output(), Contains("prompts run        1 of 1 (0 failed)"));
    CHECK(census_figure(supervisor.output(), "asker", 0) == 14 * kGiBf);
}

TEST_CASE("a busy owner is deferred, then releases at its next boundary") {
    TempFolder packs("mem");
    const json config = memory_config_of(
        {reference_pack(packs, "holder", {{"nodes", {{"load_and_work", {step_load("big", "12GiB"), step_compute(1500)}}}}}),
         reference_pack(packs, "asker", {{"nodes", {{"late_load", {step_compute(500), step_load("huge", "14GiB")}}}}})},
        {{"no_fit", "wait"}, {"wait_timeout_ms", 20000}});
    SupervisorProcess supervisor(config,
                                 workload_of({{node("holder", "load_and_work")}, {node("asker", "late_load")}}, true));
    CHECK(supervisor.wait() == 0);
    const auto log = supervisor.log();
    CHECK_THAT(log, Contains("is busy: eviction of model 1 \"big\" deferred to its next boundary"));
    CHECK_THAT(log, Contains("waits for"));
    CHECK_THAT(supervisor.output(), Contains("prompts run        2 of 2 (0 failed)"));
    CHECK(census_figure(supervisor.output(), "asker", 0) == 14 * kGiBf);
    CHECK(census_figure(supervisor.output(), "holder", 0) < 12 * kGiBf);
}

TEST_CASE("a pin cut short by the host budget makes the holders release pins in proportion") {
    TempFolder packs("mem");
    // The budget counts pins and resident sets: 8 GiB for the pins and 64 MiB for the
    // three workers' resident sets (a few MiB each). Alpha's and gamma's pins fit; beta's
    // finds about 64 MiB above low water, less the resident sets, so it is cut to that and
    // the holders are asked for the rest. Each holder runs one more node after the cut:
    // its ring delivers release_pins first.
    const json config = memory_config_of({reference_pack(packs, "alpha", {{"nodes", {{"pin", {step_pin("4GiB")}}, {"noop", {step_compute(1)}}}}}),
                                   reference_pack(packs, "gamma", {{"nodes", {{"pin", {step_pin("2GiB")}}, {"noop", {step_compute(1)}}}}}),
                                   reference_pack(packs, "beta", {{"nodes", {{"pin", {step_pin("1536MiB")}}}}})},
                                  json::object(),
                                  {{"budget_bytes", "8256MiB"}, {"low_water_bytes", "2GiB"}});
    SupervisorProcess supervisor(
        config, workload_of({{node("alpha", "pin")},
                             {node("gamma", "pin")},
                             {node("beta", "pin")},
                             {node("alpha", "noop"), node("gamma", "noop")}}));
    CHECK(supervisor.wait() == 0);
    CHECK_THAT(supervisor.log(), Contains("beta: pin of 1.5 GiB cut to"));
    CHECK_THAT(supervisor.log(), Contains("asking 2 worker(s) to release"));
    CHECK_THAT(supervisor.output(), Contains("1 pin-release round(s)"));
    // What beta was not granted (1.5 GiB less at most 64 MiB) is released 2 to 1, as
    // alpha's 4 GiB to gamma's 2 GiB.
    const double alpha_released = 4 * kGiBf - census_figure(supervisor.output(), "alpha", 1);
    const double gamma_released = 2 * kGiBf - census_figure(supervisor.output(), "gamma", 1);
    CHECK(alpha_released + gamma_released == Approx(1.5 * kGiBf - 32 * 1048576.0).epsilon(0.05));
    CHECK(alpha_released == Approx(2 * gamma_released).epsilon(0.05));
    CHECK(census_figure(supervisor.output(), "beta", 1) < 64 * 1048576.0);
}

TEST_CASE("no-fit policies: admit grants short, refuse explains, wait times out") {
    TempFolder packs("mem");
    // 30 GiB cannot fit the 24 GiB device even once the asker's own 12 GiB is detached.
    const json greedy = {{"nodes", {{"first", {step_load("a", "12GiB")}}, {"second", {step_load("b", "30GiB")}}}}};
    const json workload = workload_of({{node("greedy", "first"), node("greedy", "second")}});
    SECTION("admit") {
        SupervisorProcess supervisor(memory_config_of(json::array({reference_pack(packs, "greedy", greedy)})), workload);
        CHECK(supervisor.wait() == 1);  // the allocation then fails in the worker, as upstream's would
        CHECK_THAT(supervisor.log(), Contains("admitting greedy (slot 1) anyway (policy admit)"));
        CHECK_THAT(supervisor.output(), Contains("(1 granted short under policy admit, 0 refused)"));
        CHECK_THAT(supervisor.output(), Contains("answered           2 granted, 0 refused, 0 withdrawn"));
    }
    SECTION("refuse") {
        SupervisorProcess supervisor(memory_config_of(json::array({reference_pack(packs, "greedy", greedy)}), {{"no_fit", "refuse"}}),
                                     workload);
        CHECK(supervisor.wait() == 1);
        CHECK_THAT(supervisor.log(), Contains("refusing greedy (slot 1): needs"));
        CHECK_THAT(supervisor.log(), Contains("loading b refused: needs"));
        CHECK_THAT(supervisor.output(), Contains("(0 granted short under policy admit, 1 refused)"));
        CHECK_THAT(supervisor.output(), Contains("answered           1 granted, 1 refused, 0 withdrawn"));
    }
    SECTION("wait, then time out") {
        SupervisorProcess supervisor(
            memory_config_of(json::array({reference_pack(packs, "greedy", greedy)}), {{"no_fit", "wait"}, {"wait_timeout_ms", 300}}),
            workload);
        CHECK(supervisor.wait() == 1);
        CHECK_THAT(supervisor.log(), Contains("waits for"));
        CHECK_THAT(supervisor.log(), Contains("refusing greedy (slot 1)"));
    }
}

TEST_CASE("a worker's load makes room among its own models, which it evicts while it waits") {
    // As in one ComfyUI process: its 12 GiB model is the only candidate for its 14 GiB load,
    // and the worker, busy in the node that asks, answers the partial unload at once.
    TempFolder packs("mem");
    const json pack = {{"nodes", {{"first", {step_load("a", "12GiB")}}, {"second", {step_load("b", "14GiB")}}}}};
    SupervisorProcess supervisor(memory_config_of(json::array({reference_pack(packs, "solo", pack)}), {{"no_fit", "refuse"}}),
                                 workload_of({{node("solo", "first"), node("solo", "second")}}));
    CHECK(supervisor.wait() == 0);
    CHECK_THAT(supervisor.log(), Contains("memory: solo (slot 1) needs 18 GiB with 12 GiB free: asking solo (slot 1, "
                                          "generation 1) to free"));
    CHECK_THAT(supervisor.log(), !Contains("deferred"));
    CHECK_THAT(supervisor.output(), Contains("0 refused"));
}

TEST_CASE("a model used again moves to the front of the eviction order") {
    // Two equal models: the more recently used goes first among equals, as upstream's
    // list re-inserts a model at index 0 on every load that uses it. Model 1 ("a") was
    // loaded first but used again last, so it is the one asked.
    TempFolder packs("mem");
    const json holder = {{"nodes", {{"load", {step_load("a", "6GiB"), step_load("b", "6GiB")}},
                                    {"reuse", {step_load("a", "6GiB")}}}}};
    const json asker = {{"nodes", {{"load", {step_load("big", "14GiB")}}}}};
    SupervisorProcess supervisor(memory_config_of({reference_pack(packs, "holder", holder), reference_pack(packs, "asker", asker)}),
                                 workload_of({{node("holder", "load"), node("holder", "reuse"), node("asker", "load")}}));
    CHECK(supervisor.wait() == 0);
    CHECK_THAT(supervisor.log(), Contains("asking holder (slot 1, generation 1) to free") &&
                                     Contains("of model 1 \"a\" (6.0 GiB loaded)"));
    CHECK_THAT(supervisor.log(), !Contains("of model 2 \"b\" (6.0 GiB loaded)"));
}

TEST_CASE("a recording of a live run replays to the same decisions") {
    TempFolder packs("mem");
    const json config = memory_config_of({reference_pack(packs, "holder", {{"nodes", {{"load", {step_load("big", "12GiB")}}}}}),
                                   reference_pack(packs, "asker", {{"nodes", {{"load", {step_load("huge", "14GiB")}}}}})});
    const auto recording = (packs.path() / "recording.jsonl").string();
    SupervisorProcess supervisor(config, workload_of({{node("holder", "load"), node("asker", "load")}}), {},
                                 {"--record", recording});
    REQUIRE(supervisor.wait() == 0);
    const std::string command = supervisor_binary() + " replay " + recording + " > " + recording + ".out 2>&1";
    CHECK(std::system(command.c_str()) == 0);
    const std::string decisions = read_file(recording + ".out");
    CHECK_THAT(decisions, Contains("\"decision\":\"partial_unload\""));
    CHECK_THAT(decisions, Contains("\"decision\":\"grant\""));
}
