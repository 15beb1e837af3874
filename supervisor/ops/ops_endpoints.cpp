#include "supervisor/ops/ops_endpoints.hpp"

#include "supervisor/ctl/report_json.hpp"
#include "supervisor/ctl/segment_report.hpp"
#include "supervisor/ops/log/log.hpp"
#include "supervisor/ops/memory_history.hpp"
#include "supervisor/ops/metrics_text.hpp"
#include "supervisor/ops/ops_routes.hpp"

#include <map>
#include <optional>

namespace comfy::supervisor {

OpsEndpoints::OpsEndpoints(boost::asio::io_context& io, Sources sources) : io_(io), from_(sources) {}

OpsEndpoints::~OpsEndpoints() = default;

void OpsEndpoints::start() {
    const auto& http = from_.config.http;
    if (!http.enabled) return;
    history_ = std::make_unique<HistorySampler>(io_, [this] { return sample(); });
    history_->start();
    http_.emplace(io_, http.address, http.port,
                  OpsHandlers{[this] { return census_json(); }, [this] { return metrics_text(); },
                              [this] { return history_->json(); },
                              [this](std::uint64_t since, std::size_t limit, EventFilter filter) {
                                  return events_json(from_.journal, since, limit, filter);
                              },
                              [this](const FreeRequest& request) { answer_free(request); },
                              [this] { return from_.supervisor.readiness(); }},
                  HttpAccess{http.allowed_hosts, http.token}, from_.refusals);
    http_->start();
    log_line("http: listening on " + http.address + ":" + std::to_string(http_->port()) +
             " (GET / for the dashboard, GET /census, /metrics, /memory-history, /events, /healthz, /readyz; POST /free" +
             (http.token.empty() ? "" : " with the token of http.token_file") + ")");
}

void OpsEndpoints::stop() {
    if (http_) http_->stop();
    if (history_) history_->stop();
}

MemorySample OpsEndpoints::sample() {
    const auto& snap = from_.census.snapshot(from_.memory.now_ms());
    const auto& device = from_.config.device;
    return memory_sample(device.kind == DeviceKind::cuda ? static_cast<std::uint32_t>(device.cuda_index) : 0,
                         snap.device_total, snap.device_free, from_.config.memory.reserve_bytes,
                         from_.supervisor.census_rows());
}

void OpsEndpoints::answer_free(const FreeRequest& request) {
    if (request.unload_models) from_.memory.detach_every_model("POST /free");
    if (request.free_memory) from_.releases.release_everything(FullReleaseReason::free_endpoint);
}

std::string OpsEndpoints::census_json() const {
    // The same report comfyctl prints, read the same validated way from our own segment.
    const auto report = ctl::read_report(from_.instance, from_.segment);
    nlohmann::ordered_json out = {{"version", kCensusJsonVersion}};
    out.update(ctl::workers_json(report));
    auto census = ctl::census_json(report);
    out["census"] = std::move(census["census"]);
    out["device"] = std::move(census["device"]);
    out["ledger"] = ctl::ledger_json(report)["ledger"];
    return out.dump(2) + "\n";
}

std::string OpsEndpoints::metrics_text() {
    MetricsInput in;
    in.totals = from_.supervisor.totals();
    const auto& snap = from_.census.snapshot(from_.memory.now_ms());
    in.device_total = snap.device_total;
    in.device_free = snap.device_free;
    in.device_reserve = from_.config.memory.reserve_bytes;
    const auto& ledger = from_.memory.arbiter().ledger();
    in.ledger_models = ledger.size();
    std::map<std::uint32_t, std::string> packs;  // by slot
    for (const auto& w : from_.workers.workers()) {
        in.participants.push_back({w->pack.name, w->state, w->restarts.restarts(), w->deaf});
        packs[w->slot] = w->pack.name;
    }
    for (std::size_t row = 0; row < ledger.capacity() && in.models.size() < ledger.size(); ++row) {
        const auto& entry = ledger.at(row);
        if (!entry) continue;
        in.models.push_back({packs[entry->owner_slot], entry->model_id, entry->name, entry->total_bytes,
                             entry->loaded_known() ? std::optional<Bytes>(entry->loaded_bytes) : std::nullopt});
    }
    in.census = from_.supervisor.census_rows();
    in.host = from_.releases.host_figures();
    in.admission_waits = from_.memory.admission_waits();
    in.refusals = from_.refusals;
    return supervisor::metrics_text(in);
}

}  // namespace comfy::supervisor
