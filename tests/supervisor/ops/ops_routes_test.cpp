// What the HTTP endpoints answer, without a socket: POST /free's body as ComfyUI reads it,
// /events' query, the history's bound, the metrics' histogram, the dashboard's own requests
// (relative, each one a route), /healthz and /readyz with the readiness rule, and HEAD wherever GET is.
#include <catch2/catch.hpp>

#include "supervisor/lifecycle/worker_process.hpp"
#include "supervisor/ops/health.hpp"
#include "supervisor/ops/memory_history.hpp"
#include "supervisor/ops/metrics_text.hpp"
#include "supervisor/ops/ops_routes.hpp"

#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <regex>
#include <tuple>
#include <vector>

using namespace comfy;
using namespace comfy::supervisor;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

using EventsCall = std::tuple<std::uint64_t, std::size_t, EventFilter>;

struct Calls {
    std::vector<FreeRequest> frees;
    std::vector<EventsCall> events;
    Readiness readiness;
};

OpsHandlers handlers_into(Calls& calls) {
    return {[] { return std::string("census"); }, [] { return std::string("metrics"); },
            [] { return std::string("history"); },
            [&calls](std::uint64_t since, std::size_t limit, EventFilter filter) {
                calls.events.emplace_back(since, limit, filter);
                return std::string("events");
            },
            [&calls](const FreeRequest& request) { calls.frees.push_back(request); },
            [&calls] { return calls.readiness; }};
}

}  // namespace

TEST_CASE("POST /free reads unload_models and free_memory as ComfyUI does") {
    const auto read = [](const std::string& body) { return std::get<FreeRequest>(parse_free_request(body)); };
    CHECK(read("").nothing());
    CHECK(read(" \r\n").nothing());
    CHECK(read("{}").nothing());
    CHECK(read(R"({"unload_models": false, "free_memory": false})").nothing());
    CHECK(read(R"({"other": [1, 2]})").nothing());
    const auto unload = read(R"({"unload_models": true})");
    CHECK((unload.unload_models && !unload.free_memory));
    // free_memory alone unloads the models too, and an explicit false does not stop it.
    const auto both = read(R"({"unload_models": false, "free_memory": true})");
    CHECK((both.unload_models && both.free_memory));
}

TEST_CASE("POST /free refuses a body that is not an object of booleans, in one line") {
    for (const auto& [body, error] : std::vector<std::pair<std::string, std::string>>{
             {"{", "the body is not JSON"},
             {"null", "the body is JSON but not an object"},
             {R"({"unload_models": 1})", "unload_models must be true or false, found 1"},
             {R"({"free_memory": null})", "free_memory must be true or false, found null"}}) {
        INFO(body);
        const auto refused = parse_free_request(body);
        REQUIRE(std::holds_alternative<std::string>(refused));
        CHECK_THAT(std::get<std::string>(refused), StartsWith(error));
        CHECK(std::get<std::string>(refused).find('\n') == std::string::npos);
    }
}

TEST_CASE("the routes answer each endpoint and hand /free only a well-formed body") {
    Calls calls;
    const auto handlers = handlers_into(calls);
    CHECK(route(handlers, "GET", "/census", "").body == "census");
    CHECK(route(handlers, "GET", "/metrics", "").content_type.starts_with("text/plain; version=0.0.4"));
    CHECK(route(handlers, "GET", "/memory-history", "").body == "history");
    // ComfyUI's /history is its prompts': a proxy in front of both must not meet ours there.
    CHECK(route(handlers, "GET", "/history", "").status == 404);
    const auto page = route(handlers, "GET", "/", "");
    CHECK(page.content_type.starts_with("text/html"));
    CHECK_THAT(page.body, StartsWith("<!DOCTYPE html>"));
    // Self-contained: nothing is fetched from another origin (the one address in it is
    // SVG's namespace, a name, never fetched).
    std::string page_text = page.body;
    for (std::size_t at; (at = page_text.find("http://www.w3.org/2000/svg")) != std::string::npos;) page_text.erase(at, 26);
    for (const auto* outside : {"http://", "https://", "<link", "src=", "url(", "@import"}) {
        INFO(outside);
        CHECK(page_text.find(outside) == std::string::npos);
    }

    CHECK(route(handlers, "POST", "/free", R"({"free_memory": true})").status == 200);
    CHECK(route(handlers, "POST", "/free", R"({"free_memory": "yes"})").status == 400);
    CHECK(route(handlers, "POST", "/api/free", "{}").status == 200);
    REQUIRE(calls.frees.size() == 2);
    CHECK(calls.frees[0].free_memory);
    CHECK(calls.frees[1].nothing());
    CHECK(route(handlers, "GET", "/free", "").status == 404);
}

TEST_CASE("GET /events takes since and limit as whole numbers") {
    Calls calls;
    const auto handlers = handlers_into(calls);
    CHECK(route(handlers, "GET", "/events", "").status == 200);
    CHECK(route(handlers, "GET", "/events?since=12&limit=5", "").status == 200);
    CHECK(route(handlers, "GET", "/events?limit=3", "").status == 200);
    REQUIRE(calls.events.size() == 3);
    CHECK(calls.events[0] == EventsCall{0, SIZE_MAX, EventFilter::all});
    CHECK(calls.events[1] == EventsCall{12, 5, EventFilter::all});
    CHECK(calls.events[2] == EventsCall{0, 3, EventFilter::all});
    for (const auto* target : {"/events?since=-1", "/events?since=", "/events?since=1x", "/events?limit=many"}) {
        INFO(target);
        const auto answer = route(handlers, "GET", target, "");
        CHECK(answer.status == 400);
        CHECK_THAT(answer.body, Contains("must be a whole number"));
    }
    CHECK(calls.events.size() == 3);
}

TEST_CASE("GET /events?failures=true asks for the failures kept apart") {
    Calls calls;
    const auto handlers = handlers_into(calls);
    CHECK(route(handlers, "GET", "/events?since=4&failures=true", "").status == 200);
    CHECK(route(handlers, "GET", "/events?failures=false", "").status == 200);
    REQUIRE(calls.events.size() == 2);
    CHECK(calls.events[0] == EventsCall{4, SIZE_MAX, EventFilter::failures});
    CHECK(calls.events[1] == EventsCall{0, SIZE_MAX, EventFilter::all});
    const auto bad = route(handlers, "GET", "/events?failures=1", "");
    CHECK(bad.status == 400);
    CHECK_THAT(bad.body, Contains("failures must be true or false"));
    CHECK(calls.events.size() == 2);
}

TEST_CASE("the dashboard asks for each endpoint by a path relative to its own, which the routes answer") {
    Calls calls;
    const auto handlers = handlers_into(calls);
    const std::string page = route(handlers, "GET", "/", "").body;
    // Every request it makes goes through getJson (fetch is called there alone).
    std::size_t fetches = 0;
    for (std::size_t at = 0; (at = page.find("fetch(", at)) != std::string::npos; ++at) ++fetches;
    CHECK(fetches == 1);
    const std::regex request(R"(getJson\(\s*[`"']([^`"']*)[`"'])");
    std::vector<std::string> paths;
    for (std::sregex_iterator it(page.begin(), page.end(), request), end; it != end; ++it) paths.push_back((*it)[1]);
    REQUIRE(paths.size() >= 4);
    for (auto path : paths) {
        INFO(path);
        // Behind a proxy at https://host/gpu0/, "/census" would leave the prefix behind.
        CHECK_FALSE(path.starts_with("/"));
        CHECK(path.find("://") == std::string::npos);
        // Its template's values, as the page fills them in.
        for (const auto& [hole, value] : {std::pair{"${events.all.lastSeq}", "0"}, {"${KEEP_EVENTS}", "60"},
                                          {"${events.failures.lastSeq}", "0"}, {"${KEEP_FAILURES}", "100"}}) {
            for (std::size_t at; (at = path.find(hole)) != std::string::npos;) {
                path.replace(at, std::strlen(hole), value);
            }
        }
        CHECK(route(handlers, "GET", "/" + path, "").status == 200);
    }
    CHECK(std::count(calls.events.begin(), calls.events.end(), EventsCall{0, 100, EventFilter::failures}) == 1);
}

TEST_CASE("GET /events serves the journal after the number given") {
    EventJournal journal(3);
    for (int i = 0; i < 5; ++i) journal.record("ready", "p", "event " + std::to_string(i));
    const auto answer = nlohmann::json::parse(events_json(journal, 3, SIZE_MAX));
    CHECK(answer["last_seq"] == 5);
    REQUIRE(answer["events"].size() == 2);
    CHECK(answer["events"][0]["seq"] == 4);
    CHECK(answer["events"][1]["text"] == "event 4");
}

TEST_CASE("GET /events serves a failure with a child's line that is not UTF-8, and its failures apart") {
    EventJournal journal(2);
    journal.record("failed", "broken", "failed: \"bad byte \xff\"", {}, LogLevel::error);
    for (int i = 0; i < 3; ++i) journal.record("admission", "p", "granted");
    CHECK(nlohmann::json::parse(events_json(journal, 0, SIZE_MAX))["events"].size() == 2);
    const auto failures = nlohmann::json::parse(events_json(journal, 0, SIZE_MAX, EventFilter::failures));
    CHECK(failures["last_seq"] == 4);
    REQUIRE(failures["events"].size() == 1);
    CHECK(failures["events"][0]["level"] == "error");
    CHECK_THAT(failures["events"][0]["text"].get<std::string>(), StartsWith("failed: \"bad byte "));
}

TEST_CASE("the memory history keeps its last samples only") {
    MemoryHistory history(3);
    for (Bytes free = 1; free <= 5; ++free) history.add({{}, 0, 10, free, 2, {{"p", 10 - free, 1}}});
    REQUIRE(history.samples().size() == 3);
    CHECK(history.samples().front().device_free == 3);
    const auto json = history.to_json(std::chrono::milliseconds(2000));
    CHECK(json["version"] == 1);
    CHECK(json["interval_ms"] == 2000);
    CHECK(json["capacity"] == 3);
    REQUIRE(json["samples"].size() == 3);
    CHECK(json["samples"][2]["devices"][0]["free_bytes"] == 5);
    CHECK(json["samples"][2]["participants"][0] == nlohmann::json{{"name", "p"}, {"device_bytes", 5}, {"pinned_bytes", 1}});
}

TEST_CASE("the metrics say which participant is deaf, how often one was found so, and what was passed over") {
    MetricsInput in;
    in.participants = {{"filler", ParticipantState::ready, 0, true}, {"video", ParticipantState::busy, 1, false}};
    in.totals.deaf_marked = 3;
    in.totals.passed_over = 681;
    const auto text = metrics_text(in);
    CHECK_THAT(text, Contains("# TYPE comfy_worker_deaf gauge\n"));
    CHECK_THAT(text, Contains("comfy_worker_deaf{pack=\"filler\"} 1\n"));
    CHECK_THAT(text, Contains("comfy_worker_deaf{pack=\"video\"} 0\n"));
    CHECK_THAT(text, Contains("# TYPE comfy_deaf_marks_total counter\ncomfy_deaf_marks_total 3\n"));
    CHECK_THAT(text, Contains("# TYPE comfy_evictions_passed_over_total counter\ncomfy_evictions_passed_over_total 681\n"));
}

TEST_CASE("the metrics write the admission waits as a cumulative histogram in seconds") {
    MetricsInput in;
    in.admission_waits.cumulative = {1, 2, 2, 3, 3, 3, 3, 3, 4, 4};
    in.admission_waits.count = 5;
    in.admission_waits.sum_seconds = 42.5;
    in.participants = {{"video", ParticipantState::dead, 2, false}};
    const auto text = metrics_text(in);
    CHECK_THAT(text, Contains("# TYPE comfy_admission_wait_seconds histogram\n"));
    CHECK_THAT(text, Contains("comfy_admission_wait_seconds_bucket{le=\"0.001\"} 1\n"));
    CHECK_THAT(text, Contains("comfy_admission_wait_seconds_bucket{le=\"2.5\"} 3\n"));
    CHECK_THAT(text, Contains("comfy_admission_wait_seconds_bucket{le=\"30\"} 4\n"));
    CHECK_THAT(text, Contains("comfy_admission_wait_seconds_bucket{le=\"+Inf\"} 5\n"));
    CHECK_THAT(text, Contains("comfy_admission_wait_seconds_sum 42.5\n"));
    CHECK_THAT(text, Contains("comfy_admission_wait_seconds_count 5\n"));
    // A restart pending is told from a failure.
    CHECK_THAT(text, Contains("comfy_participant_state{pack=\"video\",state=\"dead\"} 1\n"));
    CHECK_THAT(text, Contains("comfy_participant_state{pack=\"video\",state=\"failed\"} 0\n"));
    CHECK_THAT(text, Contains("comfy_worker_up{pack=\"video\"} 0\n"));
    // Without a reading, no available figure rather than a false 0.
    CHECK(text.find("comfy_host_available_bytes") == std::string::npos);
}

TEST_CASE("GET /healthz says alive, GET /readyz says ready or answers 503 naming who it waits for") {
    Calls calls;
    const auto handlers = handlers_into(calls);
    const auto alive = route(handlers, "GET", "/healthz", "");
    CHECK(alive.status == 200);
    CHECK(nlohmann::json::parse(alive.body) == nlohmann::json{{"alive", true}});

    calls.readiness = {{}, 2, 2, false};
    const auto ready = route(handlers, "GET", "/readyz", "");
    CHECK(ready.status == 200);
    CHECK(nlohmann::json::parse(ready.body)["ready"] == true);

    calls.readiness = {{{"host", ParticipantState::spawning}}, 2, 1, false};
    const auto waiting = route(handlers, "GET", "/readyz", "");
    CHECK(waiting.status == 503);
    const auto body = nlohmann::json::parse(waiting.body);
    CHECK(body["ready"] == false);
    CHECK(body["up"] == 1);
    CHECK(body["participants"] == 2);
    CHECK(body["waiting"] == nlohmann::json::parse(R"([{"name": "host", "state": "spawning"}])"));

    calls.readiness = {{}, 2, 2, true};
    CHECK(route(handlers, "GET", "/readyz", "").status == 503);
    CHECK(nlohmann::json::parse(route(handlers, "GET", "/readyz", "").body)["shutting_down"] == true);
}

TEST_CASE("HEAD is answered wherever GET is, as GET would be") {
    Calls calls;
    const auto handlers = handlers_into(calls);
    calls.readiness = {{{"beta", ParticipantState::dead}}, 1, 0, false};
    for (const auto* target :
         {"/", "/census", "/metrics", "/memory-history", "/events?since=0", "/events?since=x", "/healthz", "/readyz"}) {
        INFO(target);
        const auto get = route(handlers, "GET", target, "");
        const auto head = route(handlers, "HEAD", target, "");
        CHECK(head.status == get.status);
        CHECK(head.content_type == get.content_type);
        // The connection leaves the body out; its length is what GET's would be.
        CHECK(head.body.size() == get.body.size());
    }
    // Where GET is not answered, neither is HEAD.
    for (const auto* target : {"/nothing", "/free"}) {
        INFO(target);
        CHECK(route(handlers, "HEAD", target, "").status == 404);
    }
}

TEST_CASE("ready: the host up and every pack up but those failed or stopped, never while shutting down") {
    boost::asio::io_context io;
    PackConfig host_config;
    host_config.name = kHostParticipantName;
    std::vector<std::unique_ptr<WorkerProcess>> workers;
    workers.push_back(std::make_unique<WorkerProcess>(host_config, 0, ParticipantKind::host, io, 16));
    for (const auto* name : {"alpha", "beta", "gamma"}) {
        PackConfig pack;
        pack.name = name;
        workers.push_back(std::make_unique<WorkerProcess>(pack, static_cast<std::uint32_t>(workers.size()),
                                                          ParticipantKind::worker, io, 16));
    }
    const auto set = [&](ParticipantState host, ParticipantState alpha, ParticipantState beta, ParticipantState gamma) {
        workers[0]->state = host;
        workers[1]->state = alpha;
        workers[2]->state = beta;
        workers[3]->state = gamma;
    };
    using S = ParticipantState;

    set(S::spawning, S::ready, S::spawning, S::ready);
    auto readiness = readiness_of(workers, false);
    CHECK_FALSE(readiness.ready());
    CHECK(readiness_text(readiness) == "2 of 4 participants up; waiting for host (spawning), beta (spawning)");

    // Busy serves; a pack failed or stopped waits for an operator, not for time.
    set(S::busy, S::ready, S::failed, S::stopped);
    readiness = readiness_of(workers, false);
    CHECK(readiness.ready());
    CHECK(readiness_text(readiness) == "2 of 4 participants up");

    // A pack restarting is not ready; the host failed or stopped never is.
    set(S::ready, S::dead, S::ready, S::ready);
    CHECK(readiness_text(readiness_of(workers, false)) == "3 of 4 participants up; waiting for alpha (dead)");
    for (const auto host : {S::failed, S::stopped}) {
        set(host, S::ready, S::ready, S::ready);
        CHECK_FALSE(readiness_of(workers, false).ready());
    }

    set(S::ready, S::ready, S::ready, S::ready);
    CHECK(readiness_of(workers, false).ready());
    readiness = readiness_of(workers, true);
    CHECK_FALSE(readiness.ready());
    CHECK(readiness_text(readiness) == "4 of 4 participants up; shutting down");
}
