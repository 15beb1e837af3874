#include "supervisor/ops/ops_routes.hpp"

#include "supervisor/ops/dashboard/dashboard_page.hpp"

#include <nlohmann/json.hpp>

#include <charconv>
#include <limits>
#include <optional>

namespace comfy::supervisor {

namespace {

constexpr const char* kJson = "application/json";
constexpr const char* kEndpoints =
    "GET /, GET /census, GET /metrics, GET /memory-history, GET /events?since=N, GET /healthz, GET /readyz or POST /free";

// The value of `name` in a query string ("since=3&limit=10"); nothing when absent.
std::optional<std::string_view> query_value(std::string_view query, std::string_view name) {
    while (!query.empty()) {
        const auto end = query.find('&');
        const auto pair = query.substr(0, end);
        const auto equals = pair.find('=');
        if (pair.substr(0, equals) == name) return equals == std::string_view::npos ? "" : pair.substr(equals + 1);
        if (end == std::string_view::npos) break;
        query.remove_prefix(end + 1);
    }
    return std::nullopt;
}

// A whole non-negative decimal number, or nothing.
std::optional<std::uint64_t> whole_number(std::string_view text) {
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) return std::nullopt;
    return value;
}

OpsResponse events(const OpsHandlers& handlers, std::string_view query) {
    std::uint64_t since = 0;
    std::uint64_t limit = std::numeric_limits<std::size_t>::max();
    for (const auto& [name, value] : {std::pair{"since", &since}, std::pair{"limit", &limit}}) {
        const auto text = query_value(query, name);
        if (!text) continue;
        const auto number = whole_number(*text);
        if (!number) {
            return error_response(400, std::string(name) + " must be a whole number, found \"" + std::string(text->substr(0, 40)) +
                                  "\"; e.g. GET /events?since=0");
        }
        *value = *number;
    }
    auto filter = EventFilter::all;
    if (const auto failures = query_value(query, "failures")) {
        if (*failures != "true" && *failures != "false") {
            return error_response(400, "failures must be true or false, found \"" +
                                           std::string(failures->substr(0, 40)) + "\"; e.g. GET /events?failures=true");
        }
        if (*failures == "true") filter = EventFilter::failures;
    }
    return {200, kJson, handlers.events_json(since, static_cast<std::size_t>(limit), filter)};
}

OpsResponse free_endpoint(const OpsHandlers& handlers, std::string_view body) {
    const auto request = parse_free_request(body);
    if (const auto* refused = std::get_if<std::string>(&request)) return error_response(400, *refused);
    handlers.free(std::get<FreeRequest>(request));
    // ComfyUI answers 200 with an empty body.
    return {200, kJson, ""};
}

}  // namespace

OpsResponse error_response(unsigned status, const std::string& text) {
    return {status, kJson, nlohmann::json{{"error", text}}.dump() + "\n"};
}

std::string events_json(const EventJournal& journal, std::uint64_t since, std::size_t limit, EventFilter filter) {
    nlohmann::json events = nlohmann::json::array();
    for (const auto& event : journal.since(since, limit, filter)) events.push_back(to_json(event));
    // A child's own line can reach an event's text: bytes that are not UTF-8 are replaced, not thrown on.
    return nlohmann::json{{"last_seq", journal.last_seq()}, {"events", std::move(events)}}.dump(
               -1, ' ', false, nlohmann::json::error_handler_t::replace) +
           "\n";
}

OpsResponse route(const OpsHandlers& handlers, std::string_view method, std::string_view target, std::string_view body) {
    const auto question = target.find('?');
    const auto path = target.substr(0, question);
    const auto query = question == std::string_view::npos ? std::string_view{} : target.substr(question + 1);
    // HEAD asks what GET would answer; the connection sends the head alone.
    const bool get = method == "GET" || method == "HEAD";
    if (get && path == "/") return {200, "text/html; charset=utf-8", std::string(dashboard_page())};
    if (get && path == "/census") return {200, kJson, handlers.census_json()};
    if (get && path == "/metrics") return {200, "text/plain; version=0.0.4; charset=utf-8", handlers.metrics_text()};
    if (get && path == "/memory-history") return {200, kJson, handlers.history_json()};
    if (get && path == "/events") return events(handlers, query);
    if (get && path == "/healthz") return {200, kJson, "{\"alive\":true}\n"};
    if (get && path == "/readyz") {
        const auto readiness = handlers.readiness();
        return {readiness.ready() ? 200U : 503U, kJson, readiness_json(readiness)};
    }
    if (method == "POST" && (path == "/free" || path == "/api/free")) return free_endpoint(handlers, body);
    return error_response(404, "no such endpoint: " + std::string(method) + " " + std::string(path.substr(0, 80)) + "; try " + kEndpoints);
}

}  // namespace comfy::supervisor
