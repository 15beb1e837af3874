// The HTTP endpoints under a shortage of descriptors, a crowd of idle clients and one
// client that hogs: the server keeps listening through EMFILE and answers again once
// descriptors are free; past its cap of open connections, or one client past its share
// of them, it turns new ones away at once; a client that trickles its request is closed
// at the head's or the body's time-out. Each refusal is counted in /metrics.
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
    return {{"device", simulated_device()}, {"http", {{"listen", "127.0.0.1:0"}}},
            {"packs", {reference_pack(packs, "solo", idle_pack())}}};
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

std::vector<std::unique_ptr<IdleConnection>> open_idle(unsigned short port, int count,
                                                       const std::string& source = "127.0.0.1") {
    std::vector<std::unique_ptr<IdleConnection>> connections;
    for (int i = 0; i < count; ++i) {
        connections.push_back(std::make_unique<IdleConnection>(port, source));
        REQUIRE(connections.back()->connected());
    }
    return connections;
}

// The sample of comfy_http_refused_total for `reason` in a scrape; "absent" when none.
std::string refused(unsigned short port, const std::string& reason) {
    const auto metrics = http_request(port, "GET", "/metrics").body;
    const std::string name = "comfy_http_refused_total{reason=\"" + reason + "\"} ";
    const auto at = metrics.find(name);
    return at == std::string::npos ? "absent" : metrics.substr(at + name.size(), metrics.find('\n', at) - at - name.size());
}

// A request head cut short: a slowloris client sends the rest a byte at a time, or never.
const std::string kPartialHead = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";

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
    // Four clients, each with its share of 16.
    std::vector<std::unique_ptr<IdleConnection>> idle;
    for (const auto* source : {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"}) {
        for (auto& connection : open_idle(port, 16, source)) idle.push_back(std::move(connection));
    }
    // Connections are accepted in order: this one comes after the 64 idle ones.
    const auto turned_away = http_request(port, "GET", "/metrics");
    CHECK(turned_away.status == 503);
    CHECK_THAT(turned_away.body, Contains("too many open connections (64)"));

    idle.clear();
    CHECK(eventually([&] { return http_request(port, "GET", "/metrics").status == 200; }, std::chrono::seconds(30)));
    CHECK(refused(port, "connections") != "0");
    CHECK(supervisor.stop() == 0);
}

TEST_CASE_METHOD(ServingSupervisor, "one client trickling requests on 64 connections holds its 16 and no more: the others are answered") {
    // Before: all 64 were taken, and every other client got 503 for as long as it went on.
    auto hog = open_idle(port, 64, "127.0.0.2");
    for (auto& connection : hog) REQUIRE(connection->send(kPartialHead));
    // Accepted in order: the first 16 are held, each one after them is answered at once.
    for (std::size_t i = 16; i < hog.size(); ++i) {
        INFO("connection " << i);
        const auto answer = hog[i]->until_closed();
        REQUIRE(answer);
        CHECK_THAT(*answer, Contains("HTTP/1.1 429"));
        CHECK_THAT(*answer, Contains("too many open connections from this client (16)"));
    }
    const auto other = http_request(port, "GET", "/metrics");
    CHECK(other.status == 200);
    CHECK_THAT(other.body, Contains("comfy_http_refused_total{reason=\"client_connections\"} 48"));
    CHECK_THAT(supervisor.log(), Contains("http: turned away a connection from 127.0.0.2: its client (127.0.0.2) holds "
                                          "16 open already, the most one client may"));
    CHECK(supervisor.stop() == 0);
}

TEST_CASE_METHOD(ServingSupervisor, "a request whose head or body does not come whole in time is closed, and counted") {
    IdleConnection head(port);
    REQUIRE(head.send(kPartialHead));
    IdleConnection body(port);
    REQUIRE(body.send("POST /free HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"unload"));
    // Closed without an answer: there is no request to answer.
    CHECK(head.until_closed() == std::string());
    CHECK(body.until_closed() == std::string());
    CHECK(refused(port, "header_timeout") == "1");
    CHECK(refused(port, "body_timeout") == "1");
    CHECK_THAT(supervisor.log(), Contains("http: closed a connection from 127.0.0.1 that sent no whole request head within 5 s"));
    CHECK_THAT(supervisor.log(), Contains("http: closed a connection from 127.0.0.1 that sent no whole body within 5 s of its head"));

    // A head or a body past its limit is refused as soon as it is known to be.
    IdleConnection large(port);
    REQUIRE(large.send("POST /free HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000000\r\n\r\n"));
    const auto answer = large.until_closed();
    REQUIRE(answer);
    CHECK_THAT(*answer, Contains("HTTP/1.1 413"));
    CHECK_THAT(*answer, Contains("a request body has at most 65536 bytes"));
    CHECK(refused(port, "too_large") == "1");
    CHECK(supervisor.stop() == 0);
}
