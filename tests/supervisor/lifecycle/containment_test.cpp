// Containment by construction: a hostile participant that writes where it used to be able
// to (the segment's header, the simulated device's use, the ledger, another slot's record,
// the supervisor's half of a ring) faults in its own process; one that leaves garbage in what is its own (its census,
// its ring) is stopped, also while idle; and every other pack runs its prompts to the end.
// A child gets exactly the descriptors it is meant to have.
#include <catch2/catch.hpp>

#include "tests/support/supervisor_process.hpp"

#include <filesystem>
#include <map>
#include <set>

using namespace comfy;
using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

json hostile(const std::string& mode) { return misbehaving_pack(mode, mode); }

// Eight prompts that each load a model and compute with a cast buffer of their own: every
// one needs the device's figures, and allocates.
json eight_loading_prompts() {
    json prompts = json::array();
    for (int i = 0; i < 8; ++i) prompts.push_back({node("honest", "work")});
    return workload_of(prompts);
}

// Runs the hostile participant `mode` beside an honest pack that runs eight loading
// prompts; what the supervisor logged and printed, once it exited with status 0.
struct Run {
    std::string log;
    std::string output;
};
Run run_beside_honest(const std::string& mode) {
    TempFolder packs("hostile");
    const json compute = {{"op", "compute"}, {"ms", 150}, {"cast_buffer", "1GiB"}};
    const json honest = reference_pack(packs, "honest", {{"nodes", {{"work", {step_load("weights", "6GiB"), compute}}}}});
    json config = memory_config_of({hostile(mode), honest});
    config["limits"]["heartbeat_timeout_ms"] = 1000;
    SupervisorProcess supervisor(config, eight_loading_prompts());
    CHECK(supervisor.wait() == 0);
    return {supervisor.log(), supervisor.output()};
}

}  // namespace

TEST_CASE("a hostile participant's writes outside its own region fault in it alone, and every prompt runs") {
    const std::string mode = GENERATE(as<std::string>{}, "write-header", "write-device-total", "write-device-use",
                                      "write-ledger", "write-participant", "write-ring-half");
    const auto [log, output] = run_beside_honest(mode);
    INFO(log);
    CHECK_THAT(log, Contains(mode + ": worker pid") && Contains("killed by SIGSEGV"));
    CHECK_THAT(log, !Contains(mode + " done and still alive"));
    CHECK_THAT(output, Contains("prompts run        8 of 8 (0 failed)"));
}

TEST_CASE("garbage in a participant's own census or idle ring stops that participant alone, within a check") {
    const auto [mode, reason] = GENERATE(table<std::string, std::string>(
        {{"census-garbage", "its census is unreadable at two heartbeat checks in a row"},
         {"ring-garbage", "its ring to the supervisor is corrupt"}}));
    const auto [log, output] = run_beside_honest(mode);
    INFO(log);
    // The hostile worker sends nothing after its misdeed: only the periodic check finds it.
    CHECK_THAT(log, Contains(mode + " done and still alive"));
    CHECK_THAT(log, Contains(mode + ": stopping pid") && Contains(reason));
    CHECK_THAT(output, Contains("prompts run        8 of 8 (0 failed)"));
}

TEST_CASE("a worker inherits exactly its three descriptors, and none of the supervisor's others") {
    TempFolder packs("fds");
    json config = memory_config_of(json::array({reference_pack(packs, "plain", idle_pack())}));
    config["http"] = {{"listen", "127.0.0.1:0"}};  // a listening socket that must not leak
    SupervisorProcess supervisor(config);
    const bool ready = supervisor.wait_for([](const auto& table) {
        for (const auto& p : table) {
            if (p.name == "plain") return p.state == ParticipantState::ready;
        }
        return false;
    });
    INFO(supervisor.log());
    REQUIRE(ready);
    const pid_t pid = supervisor.participant("plain")->pid;
    // The worker's descriptors above stderr, by what they point at; taken again while one
    // of them is a file the worker opens for a moment (its own /proc figures).
    std::map<int, std::string> targets;
    REQUIRE(eventually(
        [&] {
            targets.clear();
            for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
                const int fd = std::stoi(entry.path().filename().string());
                std::error_code gone;
                const auto target = std::filesystem::read_symlink(entry.path(), gone).string();
                if (gone || target.rfind("/proc/", 0) == 0) return false;
                if (fd > 2) targets[fd] = target;
            }
            return true;
        },
        std::chrono::seconds(5)));
    std::multiset<std::string> kinds;
    int segment_fd = -1;
    for (const auto& [fd, target] : targets) {
        INFO("fd " << fd << " -> " << target);
        if (target.find("eventfd") != std::string::npos) {
            kinds.insert("doorbell");
        } else if (target.find("memfd:comfy-sv-segment") != std::string::npos) {
            kinds.insert("segment");
            segment_fd = fd;
        } else if (target.find("memfd:comfy-sv-slot-") != std::string::npos) {
            kinds.insert("region");
        } else {
            FAIL("an unexpected descriptor " << fd << " -> " << target);
        }
    }
    CHECK(kinds == std::multiset<std::string>{"doorbell", "segment", "region"});
    // The segment's descriptor is open read-only ("flags:" in octal; the access mode is its
    // low two bits): the worker cannot map it writable (nor could it reopened: it is sealed,
    // segment_test.cpp).
    const auto fdinfo = read_file("/proc/" + std::to_string(pid) + "/fdinfo/" + std::to_string(segment_fd));
    const auto flags = fdinfo.find("flags:");
    REQUIRE(flags != std::string::npos);
    CHECK((std::stoul(fdinfo.substr(flags + 6), nullptr, 8) & 3u) == 0u);
    CHECK(supervisor.stop() == 0);
}

TEST_CASE("a child's output is logged line by line under its pack's name, and a line it forges stays its own") {
    const json talker = {{"name", "talker"},
                         {"command", "/bin/sh"},
                         {"args", {"-c", "printf 'to stdout\\n'; printf 'to stderr\\n' >&2; "
                                         "printf 'comfy-supervisor [   0.001] host: ready\\n'; "
                                         "printf 'a bell \\007 and an escape \\033[2J\\n'; printf 'no newline'; "
                                         "exec sleep 60"}}};
    SupervisorProcess supervisor(memory_config_of(json::array({talker})));
    const bool logged = eventually(
        [&] { return supervisor.log().find("talker: a bell") != std::string::npos; }, std::chrono::seconds(20));
    CHECK(supervisor.stop() == 0);
    const auto log = supervisor.log();
    INFO(log);
    REQUIRE(logged);
    CHECK_THAT(log, Contains(" info  talker: to stdout\n"));
    CHECK_THAT(log, Contains(" info  talker: to stderr\n"));
    CHECK_THAT(log, Contains(" info  talker: comfy-supervisor [   0.001] host: ready\n"));
    CHECK_THAT(log, Contains(" info  talker: a bell ? and an escape ?[2J\n"));
    // The line it never ended, once its process group is gone.
    CHECK_THAT(log, Contains(" info  talker: no newline\n"));
    for (const auto& line : {"to stdout", "to stderr"}) CHECK(log.find(std::string("\n") + line) == std::string::npos);
}
