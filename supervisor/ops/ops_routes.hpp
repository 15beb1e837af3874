#pragma once
// What each of the operator's HTTP endpoints answers, apart from the connection that
// carries it (supervisor/ops/ops_http.hpp), so the answers are tested without a socket:
//   GET  /                 the dashboard: one self-contained HTML page
//   GET  /census           workers, census, ledger and device, as JSON (what comfyctl shows)
//   GET  /metrics          the same figures in Prometheus text format, for fleets
//   GET  /memory-history   device and participant memory over the last minutes, as JSON
//                          (not /history, which is ComfyUI's prompt history)
//   GET  /events?since=N   the event journal after event N, as JSON (&limit=M: the newest M;
//                          &failures=true: the warnings and errors, kept apart and longer)
//   GET  /healthz          alive: 200 whenever the loop answers
//   GET  /readyz           ready (supervisor/ops/health.hpp): 200, or 503 saying who it waits for
//   POST /free             ComfyUI's /free: {"unload_models": bool, "free_memory": bool}
// HEAD is answered wherever GET is, with the same status and headers and no body (the
// connection leaves the body out).

#include "supervisor/ops/free_request.hpp"
#include "supervisor/ops/health.hpp"
#include "supervisor/ops/log/event_journal.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace comfy::supervisor {

// The "version" of GET /census: raised when a field is renamed, removed or changes its
// meaning; a new field does not raise it (docs/METRICS.md).
inline constexpr int kCensusJsonVersion = 1;

struct OpsHandlers {
    std::function<std::string()> census_json;
    std::function<std::string()> metrics_text;
    std::function<std::string()> history_json;
    std::function<std::string(std::uint64_t since, std::size_t limit, EventFilter filter)> events_json;
    std::function<void(const FreeRequest&)> free;
    std::function<Readiness()> readiness;
};

struct OpsResponse {
    unsigned status = 200;
    std::string content_type;
    std::string body;
};

// An error answer: {"error": text} and a newline.
OpsResponse error_response(unsigned status, const std::string& text);

// GET /events: {"last_seq": the newest event's number, "events": [to_json(event)...]}.
std::string events_json(const EventJournal& journal, std::uint64_t since, std::size_t limit,
                        EventFilter filter = EventFilter::all);

// `method` and `target` as the request line has them ("GET", "/events?since=3").
OpsResponse route(const OpsHandlers& handlers, std::string_view method, std::string_view target, std::string_view body);

}  // namespace comfy::supervisor
