// The operator's HTTP endpoints of a real supervisor: /metrics, /census, /memory-history,
// /events, /healthz, /readyz, HEAD, POST /free as ComfyUI's, and a clear 404 for anything else.
#include <catch2/catch.hpp>

#include "tests/support/http_client.hpp"
#include "tests/support/supervisor_process.hpp"

#include <string>

using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

// A supervisor whose `keeper` loads a 2 GiB model and stays idle, while `clock` computes
// for a minute so the workload (and the supervisor) stay up.
json keeper_config(const TempFolder& packs) {
    json config = memory_config_of({reference_pack(packs, "keeper", {{"nodes", {{"load", {step_load("m", "2GiB")}}}}}),
                                    reference_pack(packs, "clock", {{"nodes", {{"tick", {step_compute(60000)}}}}})});
    config["http"] = {{"listen", "127.0.0.1:0"}};
    config["limits"]["shutdown_grace_ms"] = 500;
    return config;
}

json keeper_workload() { return workload_of({{node("keeper", "load"), node("clock", "tick")}}); }

// That supervisor once the keeper's model is in the ledger, and its HTTP port.
struct KeeperHoldingAModel {
    TempFolder packs{"free"};
    SupervisorProcess supervisor{keeper_config(packs), keeper_workload()};
    unsigned short port = 0;

    KeeperHoldingAModel() {
        const auto found = http_port(supervisor);
        REQUIRE(found);
        port = *found;
        REQUIRE(eventually([&] { return supervisor.ledger().size() == 1; }, std::chrono::seconds(30)));
    }
};

}  // namespace

TEST_CASE("the HTTP endpoints serve metrics, the census, history and events, and refuse the rest") {
    TempFolder packs("http");
    const json config = {{"device", simulated_device()}, {"http", {{"listen", "127.0.0.1:0"}}},
                         {"packs", {reference_pack(packs, "solo", idle_pack())}}};
    SupervisorProcess supervisor(config);
    REQUIRE(supervisor.wait_for_state("solo", comfy::ParticipantState::ready));
    const auto port = http_port(supervisor);
    REQUIRE(port);

    const auto metrics = http_request(*port, "GET", "/metrics");
    CHECK(metrics.status == 200);
    CHECK_THAT(metrics.body, Contains("# TYPE comfy_device_total_bytes gauge"));
    CHECK_THAT(metrics.body, Contains("comfy_device_total_bytes 25769803776"));
    CHECK_THAT(metrics.body, Contains("comfy_worker_up{pack=\"solo\"} 1"));
    CHECK_THAT(metrics.body, Contains("comfy_participant_state{pack=\"solo\",state=\"ready\"} 1"));
    CHECK_THAT(metrics.body, Contains("comfy_participant_state{pack=\"solo\",state=\"failed\"} 0"));
    CHECK_THAT(metrics.body, Contains("comfy_build_info{version=\""));
    CHECK_THAT(metrics.body, Contains("comfy_admission_wait_seconds_bucket{le=\"+Inf\"} "));

    const auto census = http_request(*port, "GET", "/census");
    CHECK(census.status == 200);
    const auto report = json::parse(census.body);
    CHECK(report["version"] == 1);
    CHECK(report["workers"][0]["name"] == "solo");
    CHECK(report.contains("ledger"));

    // The first sample is taken at start-up, the next every 2 s.
    json history;
    CHECK(eventually(
        [&] {
            history = json::parse(http_request(*port, "GET", "/memory-history").body);
            return history["samples"].size() >= 2;
        },
        std::chrono::seconds(30)));
    CHECK(history["version"] == 1);
    const auto& sample = history["samples"].back();
    CHECK(sample["devices"][0]["total_bytes"] == 25769803776ULL);
    CHECK(sample["devices"][0]["reserve_bytes"] == 400ULL << 20);
    CHECK(sample["participants"][0]["name"] == "solo");

    const auto all = json::parse(http_request(*port, "GET", "/events?since=0").body);
    REQUIRE(!all["events"].empty());
    CHECK(all["events"][0]["seq"] == 1);
    const auto last = all["last_seq"].get<std::uint64_t>();
    CHECK(all["events"].back()["seq"] == last);
    const auto after = json::parse(http_request(*port, "GET", "/events?since=" + std::to_string(last)).body);
    CHECK(after["events"].empty());
    const auto newest = json::parse(http_request(*port, "GET", "/events?since=0&limit=1").body);
    REQUIRE(newest["events"].size() == 1);
    CHECK(newest["events"][0]["seq"] == last);
    const auto bad = http_request(*port, "GET", "/events?since=soon");
    CHECK(bad.status == 400);
    CHECK_THAT(bad.body, Contains("since must be a whole number"));

    const auto page = http_request(*port, "GET", "/");
    CHECK(page.status == 200);
    CHECK_THAT(page.headers, Contains("text/html"));
    CHECK_THAT(page.body, Contains("id=\"history-chart\""));

    CHECK(http_request(*port, "GET", "/healthz").status == 200);
    const auto ready = http_request(*port, "GET", "/readyz");
    CHECK(ready.status == 200);
    CHECK(json::parse(ready.body)["ready"] == true);
    // HEAD: GET's status and length, no body.
    for (const auto* path : {"/healthz", "/readyz", "/"}) {
        INFO(path);
        const auto get = http_request(*port, "GET", path);
        const auto head = http_request(*port, "HEAD", path);
        CHECK(head.status == get.status);
        CHECK(head.body.empty());
        CHECK_THAT(head.headers + "\r\n", Contains("Content-Length: " + std::to_string(get.body.size()) + "\r\n"));
    }
    const auto head_missing = http_request(*port, "HEAD", "/nothing");
    CHECK(head_missing.status == 404);
    CHECK(head_missing.body.empty());

    const auto missing = http_request(*port, "GET", "/nothing");
    CHECK(missing.status == 404);
    CHECK_THAT(missing.body, Contains("no such endpoint: GET /nothing; try GET /"));
    CHECK(supervisor.stop() == 0);
}

TEST_CASE_METHOD(KeeperHoldingAModel, "POST /free with unload_models detaches every model and answers 200 with an empty body") {
    const auto freed = http_request(port, "POST", "/free", R"({"unload_models": true})");
    CHECK(freed.status == 200);
    CHECK(freed.body.empty());
    CHECK(eventually([&] { return supervisor.ledger().empty(); }, std::chrono::seconds(30)));
    CHECK_THAT(supervisor.log(), Contains("operator asked to unload every model (POST /free): detaching 1 model(s)"));
    // Models only: no full release went out.
    CHECK(count_of(supervisor.log(), "operator asked for a full release") == 0);
    supervisor.stop();
}

TEST_CASE_METHOD(KeeperHoldingAModel, "POST /free with free_memory unloads the models and asks every worker for a full release") {
    // unload_models false does not keep the models: ComfyUI's main loop reads it only as
    // set, and free_memory alone unloads them.
    const auto freed = http_request(port, "POST", "/free", R"({"unload_models": false, "free_memory": true})");
    CHECK(freed.status == 200);
    CHECK(eventually([&] { return supervisor.ledger().empty(); }, std::chrono::seconds(30)));
    CHECK(eventually([&] { return supervisor.log().find("operator asked for a full release") != std::string::npos; },
                     std::chrono::seconds(30)));
    CHECK_THAT(supervisor.log(), Contains("operator asked to unload every model"));
    supervisor.stop();
}

TEST_CASE_METHOD(KeeperHoldingAModel, "POST /free releases nothing for an empty object or body and refuses a malformed body with 400") {
    for (const std::string body : {"", "{}", R"({"unload_models": false, "free_memory": false, "other": 1})"}) {
        INFO("body: " << body);
        const auto answer = http_request(port, "POST", "/free", body);
        CHECK(answer.status == 200);
        CHECK(answer.body.empty());
    }
    const std::pair<std::string, std::string> refused[] = {
        {"unload", "the body is not JSON"},
        {"[true]", "the body is JSON but not an object"},
        {R"({"unload_models": "yes"})", "unload_models must be true or false, found \"yes\""},
        {R"({"free_memory": 1})", "free_memory must be true or false, found 1"},
    };
    for (const auto& [body, error] : refused) {
        INFO("body: " << body);
        const auto answer = http_request(port, "POST", "/free", body);
        CHECK(answer.status == 400);
        CHECK(count_of(answer.body, "\n") == 1);
        CHECK_THAT(json::parse(answer.body).value("error", ""), Contains(error));
    }
    // Each answer above came after its request was handled: none of them detached or released.
    const auto log = supervisor.log();
    CHECK(count_of(log, "operator asked") == 0);
    CHECK(supervisor.ledger().size() == 1);
    supervisor.stop();
}
