// The supervisor and its workers as real processes: start-up, comfyctl's view, a worker
// killed mid-work, the supervisor killed, and a clean shutdown.
#include <catch2/catch.hpp>

#include "ipc/shm_segment.hpp"
#include "tests/support/supervisor_process.hpp"
#include "tests/support/test_instance.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <set>
#include <thread>

using namespace comfy;
using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

json three_pack_config(const TempFolder& folder) {
    return {{"device", {{"kind", "simulated"}, {"total_bytes", "24GiB"}}},
            {"limits", {{"heartbeat_timeout_ms", 2000}, {"shutdown_grace_ms", 2000}}},
            {"packs",
             {reference_pack(folder, "alpha", idle_pack()), reference_pack(folder, "beta", idle_pack()),
              reference_pack(folder, "gamma", idle_pack())}}};
}

bool all_ready(const std::vector<Participant>& table, std::size_t count) {
    if (table.size() != count) return false;
    for (const auto& p : table) {
        if (p.state != ParticipantState::ready) return false;
    }
    return true;
}

}  // namespace

TEST_CASE("three workers start, reach ready, and show correctly through comfyctl --json") {
    TempFolder packs("packs");
    SupervisorProcess supervisor(three_pack_config(packs));
    REQUIRE(supervisor.wait_for([](const auto& t) { return all_ready(t, 3); }));

    const auto report = json::parse(
        run_and_capture(comfyctl_binary() + " --instance " + supervisor.instance() + " workers --json").output);
    REQUIRE(report["workers"].size() == 3);
    std::set<std::string> names;
    for (const auto& row : report["workers"]) {
        names.insert(row["name"].get<std::string>());
        CHECK(row["state"] == "ready");
        CHECK(row["generation"] == 1);
        CHECK(row["restarts"] == 0);
        const pid_t pid = row["pid"].get<pid_t>();
        CHECK(pid > 0);
        CHECK(process_exists(pid));
        // The worker is the supervisor's child, in a process group of its own.
        CHECK(::getpgid(pid) == pid);
    }
    CHECK(names == std::set<std::string>{"alpha", "beta", "gamma"});
    CHECK(supervisor.stop() == 0);
    CHECK_THAT(supervisor.log(), Contains("all workers stopped; segment removed"));
}

TEST_CASE("a worker killed mid-work is restarted, its request answered, its memory returned") {
    TempFolder packs("packs");
    const json busy_pack = {{"nodes",
                             {{"load", {{{"op", "load_model"}, {"model", "big"}, {"bytes", "4GiB"}}}},
                              {"work", {{{"op", "compute"}, {"ms", 3000}}}}}}};
    json config = three_pack_config(packs);
    config["packs"][1] = reference_pack(packs, "beta", busy_pack);
    const json workload = {{"prompts", {{{{"pack", "beta"}, {"node", "load"}}, {{"pack", "beta"}, {"node", "work"}}}}}};
    SupervisorProcess supervisor(config, workload);

    // Wait until beta is computing with its 4 GiB loaded.
    REQUIRE(supervisor.wait_for_state("beta", ParticipantState::busy));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // inside the "work" node
    const auto before = supervisor.participants();
    const auto victim = *supervisor.participant("beta");
    REQUIRE(::kill(victim.pid, SIGKILL) == 0);

    REQUIRE(supervisor.wait_for([&](const auto& t) {
        for (const auto& p : t) {
            if (p.name == "beta") return p.generation == victim.generation + 1 && p.state != ParticipantState::dead;
        }
        return false;
    }));
    const auto replaced = *supervisor.participant("beta");
    CHECK(replaced.pid != victim.pid);
    CHECK(replaced.restarts == 1);
    CHECK(replaced.last_exit_signal == SIGKILL);
    for (const auto& p : before) {
        if (p.name == "beta") continue;
        const auto now = *supervisor.participant(p.name);
        CHECK(now.pid == p.pid);
        CHECK(now.generation == p.generation);
    }

    // The workload retries the interrupted node on the new worker and finishes.
    CHECK(supervisor.wait() == 0);
    CHECK_THAT(supervisor.log(), Contains("killed by SIGKILL"));
    CHECK_THAT(supervisor.log(), Contains("died during work; retrying on its replacement"));
    CHECK_THAT(supervisor.output(), Contains("prompts run        1 of 1 (0 failed)"));
    CHECK_THAT(supervisor.output(), Contains("(1 retried after a worker died)"));
    // The dead worker's 4 GiB went back to the device: the replacement never loaded it.
    const auto beta = census_row(supervisor.output(), "beta");
    CHECK(beta.has_value());
    if (beta) {
        CHECK(beta->generation == 2);
        CHECK(census_figure(supervisor.output(), "beta", 0) == 0);
    }
}

TEST_CASE("SIGTERM during a long workload fails the prompt in flight alone, starts no other, and prints the summary") {
    TempFolder packs("packs");
    json config = three_pack_config(packs);
    config["packs"][1] = reference_pack(packs, "beta", {{"nodes", {{"work", {step_compute(20)}}}}});
    const json workload = {{"repeat", 100000}, {"prompts", {{node("beta", "work")}}}};
    SupervisorProcess supervisor(config, workload);
    REQUIRE(eventually([&] { return supervisor.output().find("prompt 3/100000") != std::string::npos; },
                       std::chrono::seconds(10)));
    CHECK(supervisor.stop() == 1);  // the prompt in flight failed
    const auto output = supervisor.output();
    INFO(supervisor.log());
    CHECK_THAT(supervisor.log(), Contains("could not run: the supervisor is shutting down"));
    CHECK_THAT(output, Contains(" (1 failed, ") && Contains(" not started: shut down first)"));
}

TEST_CASE("with --keep-running the summary comes when the workload ends and the workers run on until SIGTERM") {
    TempFolder packs("packs");
    const json workload = {{"prompts", {{node("beta", "noop")}}}};
    SupervisorProcess supervisor(three_pack_config(packs), workload, {}, {"--keep-running"});
    REQUIRE(eventually([&] { return supervisor.log().find("workload finished; still running") != std::string::npos; },
                       std::chrono::seconds(20)));
    INFO(supervisor.log());
    CHECK_THAT(supervisor.output(), Contains("prompts run        1 of 1 (0 failed)"));
    // Still serving: every worker stays ready, and nothing shuts down until asked.
    CHECK(supervisor.wait_for_state("beta", ParticipantState::ready));
    CHECK_THAT(supervisor.log(), !Contains("shutting down"));
    CHECK(supervisor.stop() == 0);
    // The summary is printed once.
    const auto output = supervisor.output();
    CHECK(output.find("summary") == output.rfind("summary"));
}

TEST_CASE("when the supervisor is killed its workers die within a second and the next start is clean") {
    TempFolder packs("packs");
    const json config = three_pack_config(packs);
    const std::string instance = test_instance("sv");
    SupervisorProcess first(config, {}, instance);
    REQUIRE(first.wait_for([](const auto& t) { return all_ready(t, 3); }));
    std::vector<pid_t> workers;
    for (const auto& p : first.participants()) workers.push_back(p.pid);

    first.kill(SIGKILL);
    CHECK(first.wait() == 128 + SIGKILL);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    bool all_gone = false;
    while (!all_gone && std::chrono::steady_clock::now() < deadline) {
        while (::waitpid(-1, nullptr, WNOHANG) > 0) {
            // reap the orphans handed to us as their subreaper
        }
        all_gone = std::none_of(workers.begin(), workers.end(), process_exists);
        if (!all_gone) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    CHECK(all_gone);
    CHECK(ipc::inspect_segment(ipc::segment_name(instance)).state == ipc::SegmentState::stale);

    SupervisorProcess second(config, {}, instance);
    REQUIRE(second.wait_for([](const auto& t) { return all_ready(t, 3); }));
    CHECK_THAT(second.log(), Contains("removing stale segment"));
    CHECK(second.stop() == 0);
}
