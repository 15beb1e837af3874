// What a worker starts ends with it: a child that calls setsid() and a daemon (setsid and a
// second fork) leave the worker's process group, keeping its descriptors, and still end
// when the worker dies, and when the supervisor shuts down.
#include <catch2/catch.hpp>

#include "tests/support/supervisor_process.hpp"

#include <signal.h>

#include <regex>

using namespace comfy;
using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

// The two processes the escape mode started, once it said so; killed when the test ends,
// so that a failing check leaves nothing running.
struct Escaped {
    pid_t setsid_child = -1;
    pid_t daemon = -1;
    ~Escaped() {
        for (const pid_t pid : {setsid_child, daemon}) {
            if (pid > 0) ::kill(pid, SIGKILL);
        }
    }
    bool alive() const { return process_exists(setsid_child) || process_exists(daemon); }
};

// Waits for the escape mode's line in the log and reads the two pids from it.
void read_escaped(const SupervisorProcess& supervisor, Escaped& escaped) {
    const std::regex said("escaped: setsid child (\\d+), daemon (\\d+)");
    std::smatch found;
    std::string log;
    const bool seen = eventually(
        [&] {
            log = supervisor.log();
            return std::regex_search(log, found, said);
        },
        std::chrono::seconds(20));
    INFO(log);
    REQUIRE(seen);
    escaped.setsid_child = std::stoi(found[1]);
    escaped.daemon = std::stoi(found[2]);
    REQUIRE(process_exists(escaped.setsid_child));
    REQUIRE(process_exists(escaped.daemon));
}

}  // namespace

TEST_CASE("what a worker started outside its process group ends when the worker dies") {
    SupervisorProcess supervisor(memory_config_of(json::array({misbehaving_pack("escape", "escape")})));
    Escaped escaped;
    read_escaped(supervisor, escaped);
    const auto worker = supervisor.participant("escape");
    REQUIRE(worker);
    ::kill(worker->pid, SIGKILL);
    const bool ended = eventually([&] { return !escaped.alive(); }, std::chrono::seconds(10));
    const auto log = supervisor.log();
    INFO(log);
    CHECK(ended);
    CHECK_THAT(log, Contains("escape: ended 2 process(es) its life left behind: " + std::to_string(escaped.setsid_child)) ||
                        Contains("escape: ended 2 process(es) its life left behind: " + std::to_string(escaped.daemon)));
    CHECK(supervisor.stop() == 0);
}

TEST_CASE("what a worker started outside its process group is gone once the supervisor has shut down") {
    json config = memory_config_of(json::array({misbehaving_pack("escape", "escape")}));
    config["limits"]["shutdown_grace_ms"] = 200;  // the hostile worker never reads its Shutdown
    SupervisorProcess supervisor(config);
    Escaped escaped;
    read_escaped(supervisor, escaped);
    CHECK(supervisor.stop() == 0);
    INFO(supervisor.log());
    // The supervisor reaps what it killed before it exits: nothing is left to wait for.
    CHECK_FALSE(escaped.alive());
}
