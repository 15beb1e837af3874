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
    metric("comfy_device_total_bytes", "gauge", "Device memory in all.");
    value("comfy_device_total_bytes", in.device_total);
    metric("comfy_device_free_bytes", "gauge", "Device memory free, machine-wide.");
    value("comfy_device_free_bytes", in.device_free);
    metric("comfy_ledger_models", "gauge", "Models held on a device by any participant.");
    value("comfy_ledger_models", in.ledger_models);
    metric("comfy_admissions_total", "counter", "Admission requests handled.");
    value("comfy_admissions_total", totals.admissions);
    metric("comfy_evictions_total", "counter", "Partial unloads and detaches asked of owners.");
    value("comfy_evictions_total", totals.evictions_asked);
    metric("comfy_evicted_bytes_total", "counter", "Bytes the owners measured as freed by evictions.");
    value("comfy_evicted_bytes_total", totals.bytes_evicted);
    metric("comfy_admissions_refused_total", "counter", "Admissions refused.");
    value("comfy_admissions_refused_total", totals.refused);
    metric("comfy_released_bytes_total", "counter", "Bytes the workers measured as freed by release messages.");
    value("comfy_released_bytes_total", total_freed(totals.released));
    metric("comfy_pin_release_rounds_total", "counter", "Rounds of release_pins sent under host memory pressure.");
    value("comfy_pin_release_rounds_total", totals.pin_release_rounds);
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
