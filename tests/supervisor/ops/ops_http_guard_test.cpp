// Who the HTTP endpoints of a real supervisor answer: a web page of another origin cannot
// free the models (a text/plain POST needs no preflight, so the browser sends it), a
// name rebound to this machine (DNS rebinding) cannot read the census, a request that
// changes something bears the token where one is configured, and listening beyond
// loopback without one is refused at start-up.
#include <catch2/catch.hpp>

#include "tests/support/http_client.hpp"
#include "tests/support/supervisor_process.hpp"

#include <sys/stat.h>

#include <string>

using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

// A supervisor whose `keeper` holds a 2 GiB model and stays idle, while `clock` computes
// for a minute so the workload (and the supervisor) stay up; `http` is its http section.
json keeper_config(const TempFolder& packs, json http) {
    json config = memory_config_of({reference_pack(packs, "keeper", {{"nodes", {{"load", {step_load("m", "2GiB")}}}}}),
                                    reference_pack(packs, "clock", {{"nodes", {{"tick", {step_compute(60000)}}}}})});
    config["http"] = std::move(http);
    config["limits"]["shutdown_grace_ms"] = 500;
    return config;
}

struct Keeper {
    TempFolder packs{"guard"};
    SupervisorProcess supervisor;
    unsigned short port = 0;

    explicit Keeper(json http)
        : supervisor(keeper_config(packs, std::move(http)), workload_of({{node("keeper", "load"), node("clock", "tick")}})) {
        const auto found = http_port(supervisor);
        REQUIRE(found);
        port = *found;
        REQUIRE(eventually([&] { return supervisor.ledger().size() == 1; }, std::chrono::seconds(30)));
    }

    std::string metric(const std::string& reason) const {
        const auto metrics = http_request(port, "GET", "/metrics").body;
        const std::string name = "comfy_http_refused_total{reason=\"" + reason + "\"} ";
        const auto at = metrics.find(name);
        return at == std::string::npos ? "absent" : metrics.substr(at + name.size(), metrics.find('\n', at) - at - name.size());
    }
};

const std::string kUnload = R"({"unload_models": true})";

}  // namespace

TEST_CASE("a web page of another origin cannot free the models, and a name rebound to this machine reads nothing") {
    Keeper keeper(json{{"listen", "127.0.0.1:0"}});
    const auto port = std::to_string(keeper.port);
    // What a browser sends as Host for a page's request to the supervisor.
    const std::pair<std::string, std::string> host{"Host", "127.0.0.1:" + port};

    // What a page at https://evil.example sends with fetch(..., {method: "POST", body})
    // and no mode: a "simple" request, sent without asking.
    const auto evil = http_request_with(
        keeper.port, "POST", "/free",
        {host, {"Origin", "https://evil.example"}, {"Content-Type", "text/plain;charset=UTF-8"}}, kUnload);
    CHECK(evil.status == 403);
    CHECK_THAT(evil.body, Contains("a page of another origin (Origin \\\"https://evil.example\\\")"));
    // Another port of this machine is another origin; so are a sandboxed page and a
    // browser that says only that the site is another.
    CHECK(http_request_with(keeper.port, "POST", "/free", {host, {"Origin", "http://127.0.0.1:8080"}}, kUnload).status ==
          403);
    CHECK(http_request_with(keeper.port, "POST", "/api/free", {host, {"Origin", "null"}}, kUnload).status == 403);
    CHECK(http_request_with(keeper.port, "POST", "/free", {host, {"Sec-Fetch-Site", "cross-site"}}, kUnload).status ==
          403);
    // Each refusal was answered before anything was done.
    CHECK(count_of(keeper.supervisor.log(), "operator asked") == 0);
    CHECK(keeper.supervisor.ledger().size() == 1);
    CHECK_THAT(keeper.supervisor.log(), Contains("http: refused POST /free from 127.0.0.1: a page of another origin"));

    // DNS rebinding: the page's own name, now resolving to 127.0.0.1, is its Host.
    const auto rebound = http_request_with(keeper.port, "GET", "/census", {{"Host", "evil.example:" + port}});
    CHECK(rebound.status == 403);
    CHECK_THAT(rebound.body, Contains("is not a name of this server"));
    CHECK(http_request_with(keeper.port, "GET", "/metrics", {{"Host", "127.0.0.1.evil.example"}}).status == 403);
    CHECK(http_request_with(keeper.port, "GET", "/census", {{"Host", "localhost:" + port}}).status == 200);
    CHECK(http_request_with(keeper.port, "GET", "/census", {{"Host", "[::1]:" + port}}).status == 200);

    CHECK(keeper.metric("origin") == "4");
    CHECK(keeper.metric("host") == "2");

    // The dashboard's own page is of this origin: what it sends is answered.
    const auto same = http_request_with(keeper.port, "POST", "/free",
                                        {host, {"Origin", "http://127.0.0.1:" + port}, {"Sec-Fetch-Site", "same-origin"}},
                                        kUnload);
    CHECK(same.status == 200);
    CHECK(eventually([&] { return keeper.supervisor.ledger().empty(); }, std::chrono::seconds(30)));
    keeper.supervisor.stop();
}

TEST_CASE("with http.token_file, a POST must bear the token, and reading needs none") {
    TempFolder secrets("token");
    const std::string token = "0123456789abcdef0123456789abcdef";
    const auto file = secrets.write("http-token", token + "\n");
    REQUIRE(::chmod(file.c_str(), 0600) == 0);
    Keeper keeper(json{{"listen", "127.0.0.1:0"}, {"token_file", file.string()}});

    const auto bare = http_request(keeper.port, "POST", "/free", kUnload);
    CHECK(bare.status == 401);
    CHECK_THAT(bare.headers, Contains("WWW-Authenticate: Bearer"));
    CHECK_THAT(bare.body, Contains("POST needs the token of http.token_file: send Authorization: Bearer TOKEN"));
    const auto wrong = http_request_with(keeper.port, "POST", "/free", {{"Authorization", "Bearer " + std::string(32, '0')}},
                                         kUnload);
    CHECK(wrong.status == 401);
    CHECK_THAT(wrong.body, Contains("the bearer token is not http.token_file's"));
    CHECK(count_of(keeper.supervisor.log(), "operator asked") == 0);
    CHECK(http_request(keeper.port, "GET", "/census").status == 200);
    CHECK(keeper.metric("token") == "2");
    // The token never reaches the log.
    CHECK(keeper.supervisor.log().find(token) == std::string::npos);

    const auto borne = http_request_with(keeper.port, "POST", "/free", {{"Authorization", "Bearer " + token}}, kUnload);
    CHECK(borne.status == 200);
    CHECK(eventually([&] { return keeper.supervisor.ledger().empty(); }, std::chrono::seconds(30)));
    keeper.supervisor.stop();
}

TEST_CASE("listening beyond loopback without a token stops the supervisor at start-up, in one line, status 2") {
    TempFolder packs("exposed");
    SupervisorProcess supervisor({{"device", simulated_device()}, {"http", {{"listen", "0.0.0.0:0"}}},
                                  {"packs", {reference_pack(packs, "solo", idle_pack())}}});
    CHECK(supervisor.wait() == 2);
    const auto log = supervisor.log();
    CHECK(count_of(log, "\n") == 1);
    CHECK_THAT(log, Contains("at /http/listen: expected a loopback address such as \"127.0.0.1:8189\", or "
                             "http.token_file beside it"));
    CHECK_THAT(log, Contains("found \"0.0.0.0:0\" (reachable from other machines, with no token)"));
}
