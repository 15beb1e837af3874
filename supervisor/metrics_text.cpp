#include "supervisor/metrics_text.hpp"

#include "supervisor/release_totals.hpp"

namespace comfy::supervisor {

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
    single("comfy_device_total_bytes", "gauge", "Device memory in all.", in.device_total);
    single("comfy_device_free_bytes", "gauge", "Device memory free, machine-wide.", in.device_free);
    single("comfy_ledger_models", "gauge", "Models held on a device by any participant.", in.ledger_models);
    single("comfy_admissions_total", "counter", "Admission requests handled.", totals.admissions);
    single("comfy_evictions_total", "counter", "Partial unloads and detaches asked of owners.", totals.evictions_asked);
    single("comfy_evicted_bytes_total", "counter", "Bytes the owners measured as freed by evictions.",
           totals.bytes_evicted);
    single("comfy_admissions_refused_total", "counter", "Admissions refused.", totals.refused);
    single("comfy_released_bytes_total", "counter", "Bytes the workers measured as freed by release messages.",
           total_freed(totals.released));
    single("comfy_pin_release_rounds_total", "counter", "Rounds of release_pins sent under host memory pressure.",
           totals.pin_release_rounds);
    metric("comfy_worker_up", "gauge", "1 when the pack's worker is ready or busy.");
    for (const auto& w : in.workers) value("comfy_worker_up{pack=\"" + w.pack + "\"}", w.up ? 1 : 0);
    metric("comfy_worker_restarts_total", "counter", "Restarts of the pack's worker.");
    for (const auto& w : in.workers) value("comfy_worker_restarts_total{pack=\"" + w.pack + "\"}", w.restarts);
    metric("comfy_worker_device_bytes", "gauge", "Device memory the pack's worker holds, from its census.");
    for (const auto& row : in.census) value("comfy_worker_device_bytes{pack=\"" + row.pack + "\"}", row.census.device_used_bytes);
    metric("comfy_worker_pinned_bytes", "gauge", "Host memory the pack's worker has pinned, from its census.");
    for (const auto& row : in.census) value("comfy_worker_pinned_bytes{pack=\"" + row.pack + "\"}", row.census.pinned_bytes);
    return out;
}

}  // namespace comfy::supervisor
