// The ComfyUI host as a participant in slot 0, across real processes on a 24 GiB
// simulated device: examples/host_participant.py takes part through the Python
// package and libcomfy_participant.so as the ComfyUI integration does, beside two
// comfy-worker workers. Evictions both ways, a killed host restarted, a bad host section.
#include <catch2/catch.hpp>

#include "tests/support/sanitizer_reports.hpp"
#include "tests/support/supervisor_process.hpp"

#include <signal.h>


using namespace comfy;
using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

// The host section: the Python host program with `args`, finding the package through
// PYTHONPATH and the library through the COMFY_SV_LIBRARY the supervisor sets; no
// bytecode is written into the source tree.
json host_section(const std::vector<std::string>& args) {
    json all = json::array({HOST_PARTICIPANT_PATH});
    for (const auto& arg : args) all.push_back(arg);
    return {{"command", PYTHON3_PATH}, {"args", all}, {"env", {{"PYTHONPATH", PARTICIPANT_PYTHONPATH}, {"PYTHONDONTWRITEBYTECODE", "1"}}},
            {"restart", {{"initial_backoff_ms", 50}}}};
}

json config_with_host(const json& host, const json& packs) {
    return {{"device", {{"kind", "simulated"}, {"total_bytes", "24GiB"}}},
            {"limits", {{"heartbeat_timeout_ms", 20000}, {"shutdown_grace_ms", 2000}}},
            {"comfyui", host},
            {"packs", packs}};
}

bool host_holds(const SupervisorProcess& supervisor, std::uint32_t generation) {
    for (const auto& entry : supervisor.ledger()) {
        if (entry.owner_slot == 0 && entry.owner_generation == generation) return true;
    }
    return false;
}

}  // namespace

TEST_CASE("a worker's load that needs the host's model evicted: the host frees its bytes and the grant follows") {
    TempFolder packs("host");
    // The worker waits until the host (a Python start-up) holds its model.
    const json config = config_with_host(
        host_section({"--hold", "big=12GiB"}),
        {reference_pack(packs, "asker", {{"nodes", {{"load", {step_await_free_below("13GiB"), step_load("huge", "14GiB")}}}}}),
         reference_pack(packs, "idle", idle_pack())});
    SupervisorProcess supervisor(config, workload_of({{node("asker", "load")}}));
    CHECK(supervisor.wait() == 0);
    const auto log = supervisor.log();
    CHECK_THAT(log, Contains("host_participant: loaded big (12884901888 bytes) as model 1"));
    // Named as the host reported it, through the Python participant's register_model.
    CHECK_THAT(log, Contains("asking host (slot 0, generation 1) to free") && Contains("of model 1 \"big\" ("));
    CHECK_THAT(log, Contains("host_participant: partial_unload of model 1: freed"));
    CHECK_THAT(supervisor.output(), Contains("prompts run        1 of 1 (0 failed)"));
    CHECK(census_figure(supervisor.output(), "asker", 0) == 14 * kGiBf);
    // The host's device use went down by what it measured: the grant came after.
    const double host = census_figure(supervisor.output(), "host", 0);
    CHECK(host > 0);
    CHECK(host < 12 * kGiBf);
    CHECK(host + 14 * kGiBf <= 24 * kGiBf);
}

TEST_CASE("the host's load that needs a worker's model evicted succeeds") {
    TempFolder packs("host");
    // The host loads once the holder's 12 GiB are on the device; the clock keeps the
    // workload (and the supervisor) running until the host's 14 GiB are.
    const json config = config_with_host(
        host_section({"--later", "huge=14GiB", "--when-free-below", "13GiB"}),
        {reference_pack(packs, "holder", {{"nodes", {{"load", {step_load("big", "12GiB")}}}}}),
         reference_pack(packs, "clock", {{"nodes", {{"wait", {step_await_free_below("11GiB")}}}}})});
    SupervisorProcess supervisor(config, workload_of({{node("holder", "load"), node("clock", "wait")}}));
    CHECK(supervisor.wait() == 0);
    const auto log = supervisor.log();
    CHECK_THAT(log, Contains("memory: host (slot 0) needs"));
    CHECK_THAT(log, Contains("asking holder (slot 1, generation 1) to free"));
    CHECK_THAT(log, Contains("host_participant: loaded huge (15032385536 bytes)"));
    CHECK(census_figure(supervisor.output(), "host", 0) == 14 * kGiBf);
    const double holder = census_figure(supervisor.output(), "holder", 0);
    CHECK(holder < 12 * kGiBf);
    CHECK(holder + 14 * kGiBf <= 24 * kGiBf);
}

TEST_CASE("a load that keeps more models than one message holds keeps every one of them") {
    // The host holds 14 small models, first in the eviction order (the smallest), and
    // loads a 6 GiB one with all 14 kept, as upstream's load_models_gpu of many models:
    // only the holder's model is asked, and the keep list crossed in two messages.
    TempFolder packs("host");
    std::vector<std::string> args{"--later", "more=6GiB", "--when-free-below", "5GiB", "--later-keeps-held"};
    for (int i = 0; i < 14; ++i) {
        args.push_back("--hold");
        args.push_back("lora" + std::to_string(i) + "=256MiB");
    }
    const json config = config_with_host(
        host_section(args), {reference_pack(packs, "holder", {{"nodes", {{"load", {step_compute(1500), step_load("big", "16GiB")}}}}}),
                             reference_pack(packs, "clock", {{"nodes", {{"wait", {step_compute(4000)}}}}})});
    SupervisorProcess supervisor(config, workload_of({{node("holder", "load"), node("clock", "wait")}}));
    CHECK(supervisor.wait() == 0);
    const auto log = supervisor.log();
    CHECK_THAT(log, Contains("host_participant: loaded lora13"));
    CHECK_THAT(log, Contains("memory: host (slot 0) needs"));
    CHECK_THAT(log, Contains("asking holder (slot 1, generation 1) to free"));
    CHECK_THAT(log, !Contains("asking host (slot 0"));
    CHECK_THAT(log, Contains("host_participant: loaded more"));
    CHECK(census_figure(supervisor.output(), "host", 0) == 9.5 * kGiBf);
}

TEST_CASE("the host killed with SIGKILL is restarted in slot 0 and its ledger entries leave") {
    TempFolder packs("host");
    // A name longer than the ledger keeps, with characters outside printable ASCII: the
    // Python participant and its library cut it and make them '?', as the supervisor takes it.
    const std::string name = "\u00fcn\u00efcode\ttab-" + std::string(70, 'x');
    const json config = config_with_host(host_section({"--hold", name + "=2GiB"}),
                                         {reference_pack(packs, "a", idle_pack()), reference_pack(packs, "b", idle_pack())});
    SupervisorProcess supervisor(config);
    REQUIRE(eventually([&] { return host_holds(supervisor, 1); }, std::chrono::seconds(15)));
    for (const auto& entry : supervisor.ledger()) {
        if (entry.owner_slot != 0) continue;
        CHECK(name_in(entry.name) == "?n?code?tab-" + std::string(kModelNameBytes - 13, 'x'));
    }
    const auto first = supervisor.participant("host");
    REQUIRE(first);
    CHECK(first->slot == 0);
    REQUIRE(::kill(first->pid, SIGKILL) == 0);
    REQUIRE(supervisor.wait_for([](const auto& table) {
        for (const auto& p : table) {
            if (p.name == "host" && p.generation == 2 && p.state == ParticipantState::ready) return true;
        }
        return false;
    }));
    const auto second = *supervisor.participant("host");
    CHECK(second.slot == 0);
    CHECK(second.restarts == 1);
    CHECK(second.last_exit_signal == SIGKILL);
    // The first life's model left with it; the second holds its own.
    REQUIRE(eventually([&] { return host_holds(supervisor, 2); }, std::chrono::seconds(15)));
    CHECK_FALSE(host_holds(supervisor, 1));
    CHECK(supervisor.stop() == 0);
    CHECK_THAT(supervisor.log(), Contains("host: pid " + std::to_string(first->pid) + " (generation 1) killed by SIGKILL"));
    CHECK_THAT(supervisor.log(), Contains("host: restarting in 50 ms"));
}

TEST_CASE("a config with a bad host section is refused with one line") {
    TempFolder packs("host");
    json config = config_with_host({{"command", "no-such-python"}}, {reference_pack(packs, "a", idle_pack())});
    SupervisorProcess supervisor(config);
    CHECK(supervisor.wait() == 2);
    const auto log = supervisor.log();
    CHECK_THAT(log, Contains("at /comfyui/command: expected an executable file, found \"no-such-python\""));
    CHECK(log.find('\n') == log.size() - 1);
}

TEST_CASE("the Python participant started outside a supervisor says so in one line") {
    const std::string command = "env -u COMFY_SV_INSTANCE " + sanitizer_python_environment() +
                                "COMFY_SV_LIBRARY=" + PARTICIPANT_LIBRARY + " PYTHONPATH=" + PARTICIPANT_PYTHONPATH +
                                " PYTHONDONTWRITEBYTECODE=1 " + PYTHON3_PATH + " " + HOST_PARTICIPANT_PATH + " 2>&1";
    const auto run = run_and_capture(command);
    REQUIRE(run.started);
    const std::string& output = run.output;
    CHECK(run.status == 2);
    CHECK_THAT(output, Contains("host_participant: cannot join the supervisor: environment variable COMFY_SV_INSTANCE is not set: "
                                      "a participant must be started by comfy-supervisor"));
    CHECK(output.find('\n') == output.size() - 1);
}
