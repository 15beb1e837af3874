// Workers that fail: one that exits at once every time, one that hangs (SIGSTOP), and
// ones that break the handshake. Each is dealt with and the others run on.
#include <catch2/catch.hpp>

#include "tests/support/supervisor_process.hpp"

#include <signal.h>

#include <cstdlib>
#include <thread>

using namespace comfy;
using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

json config_with(const json& packs, int heartbeat_ms = 2000, int grace_ms = 500) {
    return {{"device", simulated_device()},
            {"limits", {{"heartbeat_timeout_ms", heartbeat_ms}, {"shutdown_grace_ms", grace_ms}}},
            {"packs", packs}};
}

std::optional<Participant> find(const std::vector<Participant>& table, const std::string& name) {
    for (const auto& p : table) {
        if (p.name == name) return p;
    }
    return std::nullopt;
}

}  // namespace

TEST_CASE("a worker that exits at once is restarted with backoff, then marked failed") {
    TempFolder packs("packs");
    const json crasher = {{"name", "crasher"},
                          {"command", "/bin/false"},
                          {"restart",
                           {{"initial_backoff_ms", 50}, {"max_backoff_ms", 400}, {"max_restarts", 4},
                            {"window_ms", 60000}}}};
    const auto start = std::chrono::steady_clock::now();
    SupervisorProcess supervisor(config_with({crasher, reference_pack(packs, "steady", idle_pack())}));
    REQUIRE(supervisor.wait_for(
        [](const auto& t) {
            const auto p = find(t, "crasher");
            return p && p->state == ParticipantState::failed;
        },
        std::chrono::seconds(20)));
    const auto elapsed = std::chrono::steady_clock::now() - start;
    // Four restarts wait 50 + 100 + 200 + 400 ms: the backoff was respected.
    CHECK(elapsed >= std::chrono::milliseconds(750));

    const auto crashed = *supervisor.participant("crasher");
    CHECK(crashed.restarts == 4);
    CHECK(crashed.generation == 5);
    CHECK(crashed.last_exit_status == 1);
    // The failed state is published just before its log line is written: wait for the line
    // (a test built with sanitizers read the log in between).
    const std::string failed_line = "crasher: failed: more than 4 restarts within 60000 ms";
    CHECK(eventually([&] { return supervisor.log().find(failed_line) != std::string::npos; }, std::chrono::seconds(5)));
    const auto log = supervisor.log();
    CHECK_THAT(log, Contains("restarting in 50 ms"));
    CHECK_THAT(log, Contains("restarting in 400 ms"));
    CHECK_THAT(log, Contains(failed_line));
    // It stays failed; the steady pack is untouched.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK(supervisor.participant("crasher")->state == ParticipantState::failed);
    CHECK(supervisor.participant("steady")->generation == 1);
    CHECK(supervisor.participant("steady")->state == ParticipantState::ready);

    // The operator asks again: the pack starts anew, and fails again after its restarts.
    const std::string retry = comfyctl_binary() + " --instance " + supervisor.instance() + " retry >/dev/null";
    REQUIRE(std::system(retry.c_str()) == 0);
    REQUIRE(supervisor.wait_for(
        [](const auto& t) {
            const auto p = find(t, "crasher");
            return p && p->generation > 5 && p->state == ParticipantState::failed;
        },
        std::chrono::seconds(20)));
    CHECK_THAT(supervisor.log(), Contains("crasher: operator asked to retry the failed pack"));
    CHECK(supervisor.stop() == 0);
}

TEST_CASE("a stopped worker is found by its silent heartbeat and replaced") {
    TempFolder packs("packs");
    SupervisorProcess supervisor(config_with(
        {reference_pack(packs, "sleepy", idle_pack()), reference_pack(packs, "steady", idle_pack())}, 400, 200));
    REQUIRE(supervisor.wait_for([](const auto& t) {
        const auto a = find(t, "sleepy");
        const auto b = find(t, "steady");
        return a && b && a->state == ParticipantState::ready && b->state == ParticipantState::ready;
    }));
    const auto sleepy = *supervisor.participant("sleepy");
    REQUIRE(::kill(sleepy.pid, SIGSTOP) == 0);

    REQUIRE(supervisor.wait_for([&](const auto& t) {
        const auto p = find(t, "sleepy");
        return p && p->generation == sleepy.generation + 1 && p->state == ParticipantState::ready;
    }));
    CHECK_THAT(supervisor.log(), Contains("sleepy: stopping pid " + std::to_string(sleepy.pid) +
                                          ": hung: no heartbeat for 400 ms"));
    CHECK(supervisor.participant("steady")->generation == 1);
    CHECK(supervisor.stop() == 0);
}

TEST_CASE("a wrong token, a wrong version, a message before Hello, a short keep list, a worker's stand-in unload or a ready out of place is refused, and the rest run on") {
    TempFolder packs("packs");
    SupervisorProcess supervisor(config_with({misbehaving_pack("forger", "wrong-token"),
                                              misbehaving_pack("stranger", "wrong-version"),
                                              misbehaving_pack("hasty", "early-message"),
                                              misbehaving_pack("keeper", "keep-mismatch"),
                                              misbehaving_pack("impostor", "standin-unload"),
                                              misbehaving_pack("unasked", "ready-unasked"),
                                              misbehaving_pack("twice", "ready-twice"),
                                              misbehaving_pack("eager", "early-node"),
                                              reference_pack(packs, "honest", idle_pack())}));
    REQUIRE(supervisor.wait_for([](const auto& t) {
        int failed = 0;
        for (const auto& p : t) failed += p.state == ParticipantState::failed;
        const auto honest = find(t, "honest");
        return failed == 8 && honest && honest->state == ParticipantState::ready;
    }));
    const auto log = supervisor.log();
    CHECK_THAT(log, Contains("forger: stopping pid") && Contains("presented a wrong token"));
    CHECK_THAT(log, Contains("stranger: stopping pid") && Contains("speaks layout version"));
    CHECK_THAT(log, Contains("hasty: stopping pid") && Contains("sent node_started before Hello"));
    CHECK_THAT(log, Contains("keeper: stopping pid") &&
                        Contains("sent an admission_request keeping 3 models after admission_keep messages naming 2"));
    CHECK_THAT(log, Contains("impostor: stopping pid") &&
                        Contains("sent a standin_unload, which only the ComfyUI host sends"));
    CHECK_THAT(log, Contains("unasked: stopping pid") && Contains("sent ready, but its Hello did not say it would"));
    CHECK_THAT(log, Contains("twice: stopping pid") && Contains("sent a second ready"));
    CHECK_THAT(log, Contains("eager: stopping pid") && Contains("sent node_started before ready"));
    // Ready at its first ready, never before; never at all without one.
    CHECK(count_of(log, "twice: ready (") == 1);
    CHECK(count_of(log, "eager: ready (") == 0);
    CHECK(supervisor.participant("honest")->generation == 1);
    CHECK(supervisor.stop() == 0);
}

TEST_CASE("a worker that joins before its start-up is spawning until ready, past the Hello's time-out, and is ended when it outruns ready_timeout_ms") {
    json config = config_with(json::array({misbehaving_pack("importer", "never-ready")}));
    config["limits"]["handshake_timeout_ms"] = 300;
    config["limits"]["ready_timeout_ms"] = 3000;
    SupervisorProcess supervisor(config);
    const bool seen = eventually([&] { return supervisor.log().find("importer: joined (pid") != std::string::npos; },
                                 std::chrono::seconds(10));
    INFO(supervisor.log());
    REQUIRE(seen);
    // Joined, its Hello answered: still spawning, not ready, and not killed for the Hello.
    const auto joined = supervisor.participant("importer");
    REQUIRE(joined);
    CHECK(joined->state == ParticipantState::spawning);
    REQUIRE(supervisor.wait_for_state("importer", ParticipantState::failed, std::chrono::seconds(15)));
    const auto log = supervisor.log();
    INFO(log);
    CHECK_THAT(log, Contains("importer: joined (pid " + std::to_string(joined->pid) +
                             ", generation 1); ready once its start-up is done"));
    CHECK_THAT(log, Contains("importer: stopping pid " + std::to_string(joined->pid) +
                             ": not ready within 3000 ms of its Hello; raise limits.ready_timeout_ms if its start-up "
                             "needs longer"));
    CHECK(count_of(log, "no Hello within") == 0);
    CHECK(count_of(log, "importer: ready (") == 0);
    CHECK(supervisor.stop() == 0);
}
