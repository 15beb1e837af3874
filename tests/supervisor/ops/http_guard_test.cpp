// Which HTTP requests are answered at all, without a socket: Host names this server,
// Origin is the server Host names (as ComfyUI's origin-only middleware has it), and a
// request that changes something bears the token where one is configured.
#include <catch2/catch.hpp>

#include "supervisor/ops/http_guard.hpp"

#include <nlohmann/json.hpp>

using namespace comfy::supervisor;
using Catch::Matchers::Contains;

namespace {

RequestHead get(std::string_view host) { return {"GET", "/census", host, std::nullopt, std::nullopt, std::nullopt}; }

RequestHead post(std::string_view host, std::optional<std::string_view> origin,
                 std::optional<std::string_view> authorization = std::nullopt) {
    return {"POST", "/free", host, origin, std::nullopt, authorization};
}

std::optional<HttpRefusal> reason(const HttpAccess& access, const RequestHead& request) {
    const auto refused = screen(access, request);
    if (!refused) return std::nullopt;
    // Every refusal is one line, as JSON.
    CHECK(refused->text.find('\n') == std::string::npos);
    CHECK(nlohmann::json::parse(refused->answer.body)["error"] == refused->text);
    return refused->reason;
}

}  // namespace

TEST_CASE("Host must be localhost, an IP address or an allowed name, in any case and with any port") {
    const HttpAccess access{{"gpu-box.example.com"}, ""};
    for (const auto* host : {"localhost", "LocalHost:8189", "127.0.0.1:8189", "10.1.2.3", "[::1]:8189", "[fe80::1]",
                             "gpu-box.example.com:8189", "GPU-BOX.example.COM"}) {
        INFO(host);
        CHECK_FALSE(reason(access, get(host)));
    }
    for (const auto* host : {"evil.example:8189", "127.0.0.1.evil.example", "localhost.evil.example", "::1", "[::1",
                             "127.0.0.1:", "127.0.0.1:x", "127.0.0.1:70000", ":8189", "example.com", "0x7f.1"}) {
        INFO(host);
        CHECK(reason(access, get(host)) == HttpRefusal::host);
    }
    const RequestHead none{"GET", "/", std::nullopt, std::nullopt, std::nullopt, std::nullopt};
    const auto missing = screen(access, none);
    REQUIRE(missing);
    CHECK(missing->answer.status == 400);
    CHECK(screen(access, get("evil.example"))->answer.status == 403);
    CHECK_THAT(screen(access, get("evil.example"))->text, Contains("add the name to http.allowed_hosts"));
}

TEST_CASE("Origin must be the server Host names, its port or its scheme's") {
    const HttpAccess access;
    CHECK_FALSE(reason(access, post("127.0.0.1:8189", "http://127.0.0.1:8189")));
    CHECK_FALSE(reason(access, post("LOCALHOST:8189", "http://localhost:8189")));
    CHECK_FALSE(reason(access, post("[::1]:8189", "http://[::1]:8189")));
    CHECK_FALSE(reason(access, post("localhost:80", "http://localhost")));
    // Behind a proxy that drops the port from Host, the name decides.
    CHECK_FALSE(reason(access, post("localhost", "https://localhost")));
    CHECK_FALSE(reason(access, post("127.0.0.1:8189", std::nullopt)));  // not a browser, or a same-origin GET
    for (const auto* origin : {"https://evil.example", "http://127.0.0.1:8080", "http://127.0.0.1", "null",
                               "file://", "ftp://127.0.0.1:8189", "http://127.0.0.1:8189.evil.example", "127.0.0.1:8189"}) {
        INFO(origin);
        CHECK(reason(access, post("127.0.0.1:8189", origin)) == HttpRefusal::origin);
    }
    RequestHead cross = post("127.0.0.1:8189", std::nullopt);
    cross.fetch_site = "cross-site";
    CHECK(reason(access, cross) == HttpRefusal::origin);
    cross.fetch_site = "same-origin";
    CHECK_FALSE(reason(access, cross));
    // A GET of another origin is refused too: nothing of this server is any page's but its own.
    RequestHead read = get("127.0.0.1:8189");
    read.origin = "https://evil.example";
    CHECK(reason(access, read) == HttpRefusal::origin);
}

TEST_CASE("with a token, a request other than GET or HEAD must bear it") {
    const std::string token = "0123456789abcdef0123456789abcdef";
    const HttpAccess access{{}, token};
    const std::string borne = "Bearer " + token;
    CHECK_FALSE(reason(access, post("127.0.0.1", std::nullopt, borne)));
    CHECK_FALSE(reason(access, post("127.0.0.1", std::nullopt, "bearer  " + token)));
    CHECK_FALSE(reason(access, get("127.0.0.1")));
    for (const auto& wrong : {std::string("Bearer"), std::string("Bearer "), "Basic " + token, borne + "0",
                              borne.substr(0, borne.size() - 1), "Bearer " + std::string(token.size(), '0')}) {
        INFO(wrong);
        CHECK(reason(access, post("127.0.0.1", std::nullopt, wrong)) == HttpRefusal::token);
    }
    const auto bare = screen(access, post("127.0.0.1", std::nullopt));
    REQUIRE(bare);
    CHECK(bare->reason == HttpRefusal::token);
    CHECK(bare->answer.status == 401);
    CHECK(bare->authenticate == "Bearer realm=\"comfy-supervisor\"");
    CHECK_THAT(bare->text, Contains("send Authorization: Bearer TOKEN"));
    // Without one (loopback only), no request needs it; the origin still decides.
    CHECK_FALSE(reason(HttpAccess{}, post("127.0.0.1", std::nullopt)));
    // The origin is judged first: a page of another origin learns nothing of the token.
    CHECK(reason(access, post("127.0.0.1", "https://evil.example", borne)) == HttpRefusal::origin);
}
