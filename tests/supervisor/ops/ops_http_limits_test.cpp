// The HTTP endpoints under a shortage of descriptors and a crowd of idle clients: the
// server keeps listening through EMFILE and answers again once descriptors are free, and
// past its cap of open connections it turns new ones away at once.
#include <catch2/catch.hpp>

#include "tests/support/http_client.hpp"
#include "tests/support/supervisor_process.hpp"

#include <sys/resource.h>

#include <filesystem>
#include <memory>
#include <set>
#include <vector>

using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

json http_config(const TempFolder& packs) {
    return {{"http", {{"listen", "127.0.0.1:0"}}}, {"packs", {reference_pack(packs, "solo", idle_pack())}}};
}

// The open-file limit that leaves `pid` exactly `room` more descriptors: a new one takes
// the lowest free number below the limit, and the numbers open now may have gaps.
rlim_t limit_leaving(pid_t pid, int room) {
    std::set<int> open;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
        open.insert(std::stoi(entry.path().filename().string()));
    }
    int limit = 0;
    for (int free = 0; free < room; ++limit) free += open.count(limit) == 0 ? 1 : 0;
    return static_cast<rlim_t>(limit);
}

// A supervisor with its HTTP endpoints and one idle pack, once that pack is ready.
struct ServingSupervisor {
    TempFolder packs{"http"};
    SupervisorProcess supervisor{http_config(packs)};
    unsigned short port = 0;

    ServingSupervisor() {
        REQUIRE(supervisor.wait_for_state("solo", comfy::ParticipantState::ready, std::chrono::seconds(30)));
        const auto found = http_port(supervisor);
        REQUIRE(found);
        port = *found;
    }
};

std::vector<std::unique_ptr<IdleConnection>> open_idle(unsigned short port, int count) {
    std::vector<std::unique_ptr<IdleConnection>> connections;
    for (int i = 0; i < count; ++i) {
        connections.push_back(std::make_unique<IdleConnection>(port));
        REQUIRE(connections.back()->connected());
    }
    return connections;
}

}  // namespace

TEST_CASE_METHOD(ServingSupervisor, "the HTTP endpoints answer again once descriptors run out and come back") {
    REQUIRE(http_request(port, "GET", "/metrics").status == 200);

    // Room for a few more descriptors than the supervisor holds now, then more idle
    // clients than that: accept fails with EMFILE while they are open.
    rlimit original{};
    REQUIRE(::prlimit(supervisor.pid(), RLIMIT_NOFILE, nullptr, &original) == 0);
    const rlimit low{limit_leaving(supervisor.pid(), 6), original.rlim_max};
    REQUIRE(::prlimit(supervisor.pid(), RLIMIT_NOFILE, &low, nullptr) == 0);
    auto idle = open_idle(port, 40);
    CHECK(eventually([&] { return supervisor.log().find("http: cannot accept a connection (Too many open files)") !=
                                  std::string::npos; },
                     std::chrono::seconds(30)));
    CHECK(http_request(port, "GET", "/metrics", {}, std::chrono::seconds(2)).status == 0);

    // The clients go; the supervisor closes their connections and takes new ones again.
    idle.clear();
    CHECK(eventually([&] { return http_request(port, "GET", "/metrics", {}, std::chrono::seconds(5)).status == 200; },
                     std::chrono::seconds(60)));
    // One line for the storm, not one per failed accept, and how many more failed once
    // its window ended, though none failed after it.
    CHECK(count_of(supervisor.log(), "http: cannot accept a connection") <= 3);
    CHECK(eventually([&] { return supervisor.log().find("more lines like this suppressed") != std::string::npos; },
                     std::chrono::seconds(30)));
    REQUIRE(::prlimit(supervisor.pid(), RLIMIT_NOFILE, &original, nullptr) == 0);
    CHECK(supervisor.stop() == 0);
}

TEST_CASE_METHOD(ServingSupervisor, "past 64 open connections the HTTP endpoints answer 503 at once until some close") {
    auto idle = open_idle(port, 64);
    // Connections are accepted in order: this one comes after the 64 idle ones.
    const auto turned_away = http_request(port, "GET", "/metrics");
    CHECK(turned_away.status == 503);
    CHECK_THAT(turned_away.body, Contains("too many open connections (64)"));

    idle.clear();
    CHECK(eventually([&] { return http_request(port, "GET", "/metrics").status == 200; }, std::chrono::seconds(30)));
    CHECK(supervisor.stop() == 0);
}
