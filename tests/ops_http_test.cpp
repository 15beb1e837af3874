// The operator's HTTP endpoints of a real supervisor: /metrics, /census, /free, and a
// clear 404 for anything else.
#include <catch2/catch.hpp>

#include "tests/support/supervisor_process.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <regex>
#include <string>

using namespace comfy::test;
using Catch::Matchers::Contains;

namespace {

// One request over a fresh connection to 127.0.0.1:port; the whole response.
std::string http_request(unsigned short port, const std::string& method, const std::string& path) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    const std::string request = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n";
    REQUIRE(::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
    std::string response;
    char buffer[4096];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) response.append(buffer, static_cast<std::size_t>(n));
    ::close(fd);
    return response;
}

}  // namespace

TEST_CASE("the HTTP endpoints serve metrics, the census and /free, and refuse the rest") {
    TempFolder packs("http");
    const nlohmann::json config = {{"http", {{"listen", "127.0.0.1:0"}}},
                                   {"packs", {reference_pack(packs, "solo", idle_pack())}}};
    SupervisorProcess supervisor(config);
    REQUIRE(supervisor.wait_for([](const auto& t) { return t.size() == 1 && t[0].state == comfy::ParticipantState::ready; }));
    std::smatch found;
    const std::string log = supervisor.log();
    REQUIRE(std::regex_search(log, found, std::regex("http: listening on 127\\.0\\.0\\.1:([0-9]+)")));
    const auto port = static_cast<unsigned short>(std::stoi(found[1].str()));

    const auto metrics = http_request(port, "GET", "/metrics");
    CHECK_THAT(metrics, Contains("HTTP/1.1 200"));
    CHECK_THAT(metrics, Contains("# TYPE comfy_device_total_bytes gauge"));
    CHECK_THAT(metrics, Contains("comfy_device_total_bytes 25769803776"));
    CHECK_THAT(metrics, Contains("comfy_worker_up{pack=\"solo\"} 1"));

    const auto census = http_request(port, "GET", "/census");
    CHECK_THAT(census, Contains("HTTP/1.1 200"));
    CHECK_THAT(census, Contains("\"name\": \"solo\""));
    CHECK_THAT(census, Contains("\"ledger\""));

    const auto freed = http_request(port, "POST", "/free");
    CHECK_THAT(freed, Contains("HTTP/1.1 202"));
    CHECK(supervisor.wait_for([&](const auto&) {
        return supervisor.log().find("operator asked for a full release") != std::string::npos;
    }));

    const auto missing = http_request(port, "GET", "/nothing");
    CHECK_THAT(missing, Contains("HTTP/1.1 404"));
    CHECK_THAT(missing, Contains("try GET /census, GET /metrics or POST /free"));
    CHECK(supervisor.stop() == 0);
}
