#include "supervisor/ops/metrics_text.hpp"

#include "comfy/version.hpp"
#include "supervisor/ctl/segment_report.hpp"
#include "supervisor/memory/release_totals.hpp"

#include <charconv>

namespace comfy::supervisor {

namespace {

// The shortest decimal that reads back as `v` ("0.005", "2.5", "30"), as Prometheus
// writes bucket bounds.
std::string decimal(double v) {
    char text[32];
    const auto end = std::to_chars(text, text + sizeof text, v).ptr;
    return std::string(text, end);
}

bool up(ParticipantState state) { return state == ParticipantState::ready || state == ParticipantState::busy; }

}  // namespace

std::string label_value(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (const char c : text) {
        if (c == '\\' || c == '"') {
            out += '\\';
            out += c;
        } else if (c == '\n') {
            out += "\\n";
        } else {
            out += c;
        }
    }
    return out;
}

std::string metrics_text(const MetricsInput& in) {
    const auto& totals = in.totals;
    std::string out;
    const auto metric = [&out](const std::string& name, const char* type, const char* help) {
        out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    };
    const auto value = [&out](const std::string& sample, std::uint64_t v) { out += sample + " " + std::to_string(v) + "\n"; };
    // A metric with one sample and no labels.
    const auto single = [&](const std::string& name, const char* type, const char* help, std::uint64_t v) {
        metric(name, type, help);
        value(name, v);
    };
    const auto pack = [](const std::string& name, const std::string& family) {
        return family + "{pack=\"" + label_value(name) + "\"}";
    };

    metric("comfy_build_info", "gauge", "Always 1; the version label says which comfy-supervisor runs.");
    value(std::string("comfy_build_info{version=\"") + kVersion + "\"}", 1);
    single("comfy_device_total_bytes", "gauge", "Device memory in all.", in.device_total);
    single("comfy_device_free_bytes", "gauge", "Device memory free, machine-wide.", in.device_free);
    single("comfy_device_reserve_bytes", "gauge", "Device memory kept free by every admission (memory.reserve_bytes).",
           in.device_reserve);
    single("comfy_ledger_models", "gauge", "Models held on a device by any participant.", in.ledger_models);
    single("comfy_admissions_total", "counter", "Admission requests handled.", totals.admissions);
    single("comfy_evictions_total", "counter", "Partial unloads and detaches asked of owners.", totals.evictions_asked);
    single("comfy_evicted_bytes_total", "counter", "Bytes the owners measured as freed by evictions.",
           totals.bytes_evicted);
    single("comfy_admissions_refused_total", "counter", "Admissions refused.", totals.refused);
    single("comfy_deaf_marks_total", "counter",
           "Times a participant let a command go unanswered past the answer time-out and was found deaf.",
           totals.deaf_marked);
    single("comfy_evictions_passed_over_total", "counter",
           "Evictions and stand-in unloads not asked because their owner was deaf.", totals.passed_over);
    single("comfy_released_bytes_total", "counter", "Bytes the workers measured as freed by release messages.",
           total_freed(totals.released));
    single("comfy_pin_release_rounds_total", "counter", "Rounds of release_pins sent under host memory pressure.",
           totals.pin_release_rounds);
    metric("comfy_receipts_refused_total", "counter",
           "Receipts not counted: for nothing asked of that life (unasked), or beyond what it could have freed "
           "(beyond_bound, counted up to that).");
    value("comfy_receipts_refused_total{reason=\"unasked\"}", totals.receipts_refused.unasked);
    value("comfy_receipts_refused_total{reason=\"beyond_bound\"}", totals.receipts_refused.beyond_bound);

    const auto& waits = in.admission_waits;
    metric("comfy_admission_wait_seconds", "histogram",
           "Time from an admission request reaching the supervisor to its grant or refusal.");
    for (std::size_t i = 0; i < AdmissionWaits::kBuckets.size(); ++i) {
        value("comfy_admission_wait_seconds_bucket{le=\"" + decimal(AdmissionWaits::kBuckets[i]) + "\"}",
              waits.cumulative[i]);
    }
    value("comfy_admission_wait_seconds_bucket{le=\"+Inf\"}", waits.count);
    out += "comfy_admission_wait_seconds_sum " + decimal(waits.sum_seconds) + "\n";
    value("comfy_admission_wait_seconds_count", waits.count);

    metric("comfy_participant_state", "gauge",
           "1 for the participant's current state, 0 for the others (spawning: not ready yet, before its Hello or "
           "importing its pack; dead: exited, its restart pending; failed: no more restarts until an operator "
           "retries).");
    for (const auto& p : in.participants) {
        for (std::uint8_t s = 0; s < kParticipantStateCount; ++s) {
            value("comfy_participant_state{pack=\"" + label_value(p.pack) + "\",state=\"" + ctl::state_name(s) + "\"}",
                  static_cast<std::uint8_t>(p.state) == s ? 1 : 0);
        }
    }
    metric("comfy_worker_up", "gauge", "1 when the pack's worker is ready or busy.");
    for (const auto& p : in.participants) value(pack(p.pack, "comfy_worker_up"), up(p.state) ? 1 : 0);
    metric("comfy_worker_deaf", "gauge", "1 while the arbiter passes the pack's worker over for not answering.");
    for (const auto& p : in.participants) value(pack(p.pack, "comfy_worker_deaf"), p.deaf ? 1 : 0);
    metric("comfy_worker_restarts_total", "counter", "Restarts of the pack's worker.");
    for (const auto& p : in.participants) value(pack(p.pack, "comfy_worker_restarts_total"), p.restarts);
    metric("comfy_worker_device_bytes", "gauge", "Device memory the pack's worker holds, from its census.");
    for (const auto& row : in.census) value(pack(row.pack, "comfy_worker_device_bytes"), row.census.device_used_bytes);
    metric("comfy_worker_pinned_bytes", "gauge", "Host memory the pack's worker has pinned, from its census.");
    for (const auto& row : in.census) value(pack(row.pack, "comfy_worker_pinned_bytes"), row.census.pinned_bytes);
    metric("comfy_worker_pinned_ceiling_bytes", "gauge",
           "The most host memory the pack's worker may pin (its MAX_PINNED_MEMORY); 0 when it has none.");
    for (const auto& row : in.census) value(pack(row.pack, "comfy_worker_pinned_ceiling_bytes"), row.census.pinned_ceiling);

    // A series per model in the ledger: its owner, its id (two models may share a name) and
    // its name.
    const auto model = [](const ModelMetrics& m, const std::string& family) {
        return family + "{pack=\"" + label_value(m.pack) + "\",model_id=\"" + std::to_string(m.model_id) +
               "\",model=\"" + label_value(m.name) + "\"}";
    };
    metric("comfy_model_total_bytes", "gauge", "Size of each model in the ledger, by its owner's pack and its name.");
    for (const auto& m : in.models) value(model(m, "comfy_model_total_bytes"), m.total);
    metric("comfy_model_loaded_bytes", "gauge",
           "Bytes of each model in the ledger loaded on the device; no sample until its owner reports it.");
    for (const auto& m : in.models) {
        if (m.loaded) value(model(m, "comfy_model_loaded_bytes"), *m.loaded);
    }

    single("comfy_host_budget_bytes", "gauge", "Host RAM budget (host.budget_bytes); 0 when the machine's own figure is used.",
           in.host.budget);
    single("comfy_host_low_water_bytes", "gauge", "Host RAM kept available: pins are granted only above it.",
           in.host.low_water);
    single("comfy_host_pinned_bytes", "gauge", "Host memory pinned by every participant together, from their censuses.",
           in.host.pinned);
    metric("comfy_http_refused_total", "counter",
           "HTTP connections and requests the endpoints turned away, closed or refused, by reason.");
    for (std::size_t i = 0; i < kHttpRefusalNames.size(); ++i) {
        value(std::string("comfy_http_refused_total{reason=\"") + kHttpRefusalNames[i] + "\"}", in.refusals.http[i]);
    }
    metric("comfy_control_refused_total", "counter",
           "Control-socket connections turned away, closed or let go by a bound, by reason.");
    for (std::size_t i = 0; i < kControlRefusalNames.size(); ++i) {
        value(std::string("comfy_control_refused_total{reason=\"") + kControlRefusalNames[i] + "\"}",
              in.refusals.control[i]);
    }
    if (in.host.available) {
        single("comfy_host_available_bytes", "gauge",
               "Host RAM available for pins: the budget left, else the cgroup's headroom or MemAvailable.",
               *in.host.available);
    }
    return out;
}

}  // namespace comfy::supervisor
