#include "supervisor/ctl/report_json.hpp"

namespace comfy::ctl {

namespace {

nlohmann::ordered_json header_json(const SegmentReport& report) {
    return {{"instance", report.instance}, {"segment", report.segment}, {"supervisor_pid", report.supervisor_pid}};
}

nlohmann::ordered_json worker_json(const WorkerRow& row) {
    nlohmann::ordered_json entry = {{"slot", row.slot}, {"status", row.busy ? "busy" : "ok"}};
    const bool known = !row.busy;
    auto put = [&](const char* key, auto value) { entry[key] = known ? nlohmann::ordered_json(value) : nlohmann::ordered_json(); };
    put("name", row.name);
    put("name_valid", row.name_valid);
    put("kind", row.kind);
    put("pid", row.pid);
    put("generation", row.generation);
    put("state", row.state);
    put("deaf", row.deaf);
    put("restarts", row.restarts);
    put("last_exit_status", row.last_exit_status);
    put("last_exit_signal", row.last_exit_signal);
    put("started_at_ms", row.started_at_ms);
    put("busy_since_ms", row.busy_since_ms);
    put("in_callback", row.in_callback);
    entry["last_node_name"] = known && !row.last_node.empty() ? nlohmann::ordered_json(row.last_node)
                                                              : nlohmann::ordered_json();
    entry["node_classes"] = known && row.node_classes ? nlohmann::ordered_json(*row.node_classes)
                                                      : nlohmann::ordered_json();
    entry["note"] = known && !row.note.empty() ? nlohmann::ordered_json(row.note) : nlohmann::ordered_json();
    return entry;
}

nlohmann::ordered_json census_entry_json(const CensusRow& row) {
    nlohmann::ordered_json entry = {{"slot", row.slot}, {"status", status_name(row.status)}};
    const bool participant_known = !row.participant_busy;
    entry["name"] = participant_known ? nlohmann::ordered_json(row.name) : nlohmann::ordered_json();
    entry["generation"] = participant_known ? nlohmann::ordered_json(row.generation) : nlohmann::ordered_json();
    const bool known = figures_known(row.status);
    const CensusRecord& c = row.census;
    auto put = [&](const char* key, auto value) { entry[key] = known ? nlohmann::ordered_json(value) : nlohmann::ordered_json(); };
    put("census_generation", c.generation);
    put("pinned_bytes", c.pinned_bytes);
    put("pinned_ceiling", c.pinned_ceiling);
    put("pin_errors", c.pin_errors);
    put("device_used_bytes", c.device_used_bytes);
    put("bytes_evicted", c.bytes_evicted);
    put("bytes_evicted_active", c.bytes_evicted_active);
    put("churn", c.churn);
    put("allocator_reserved", c.allocator_reserved);
    put("allocator_active", c.allocator_active);
    put("cast_buffer_bytes", c.cast_buffer_bytes);
    put("resident_set_bytes", c.resident_set_bytes);
    put("last_node", c.last_node);
    put("prompt_epoch", c.prompt_epoch);
    // In the supervisor's report of the census: unknown while that report is mid-write.
    entry["heartbeat"] = row.status == RecordStatus::busy ? nlohmann::ordered_json() : nlohmann::ordered_json(row.heartbeat);
    return entry;
}

}  // namespace

nlohmann::ordered_json workers_json(const SegmentReport& report) {
    nlohmann::ordered_json out = header_json(report);
    out["workers"] = nlohmann::ordered_json::array();
    for (const auto& row : report.workers) out["workers"].push_back(worker_json(row));
    return out;
}

nlohmann::ordered_json census_json(const SegmentReport& report) {
    nlohmann::ordered_json out = header_json(report);
    const auto& device = report.device;
    out["device"] = {{"kind", device.total_bytes != 0 ? "simulated" : "real"},
                     {"total_bytes", device.total_bytes},
                     {"used_bytes", device.used_bytes},
                     {"free_bytes", device.free_bytes ? nlohmann::ordered_json(*device.free_bytes) : nlohmann::ordered_json()}};
    out["census"] = nlohmann::ordered_json::array();
    for (const auto& row : report.census) out["census"].push_back(census_entry_json(row));
    return out;
}

nlohmann::ordered_json ledger_json(const SegmentReport& report) {
    nlohmann::ordered_json out = header_json(report);
    out["ledger"] = nlohmann::ordered_json::array();
    for (const auto& row : report.ledger) {
        nlohmann::ordered_json entry = {{"row", row.row}, {"status", row.busy ? "busy" : row.valid ? "ok" : "invalid"}};
        if (!row.busy) {
            entry["owner"] = row.owner;
            entry["owner_slot"] = row.owner_slot;
            entry["owner_generation"] = row.owner_generation;
            entry["model_id"] = row.model_id;
            entry["name"] = row.name;
            entry["device"] = row.device;
            entry["total_bytes"] = row.total_bytes;
            entry["loaded_bytes"] = row.loaded_bytes ? nlohmann::ordered_json(*row.loaded_bytes) : nlohmann::ordered_json();
            entry["references"] = row.references;
            entry["currently_used"] = row.currently_used;
            entry["dynamic"] = row.dynamic;
            entry["load_order"] = row.load_order;
        }
        out["ledger"].push_back(entry);
    }
    return out;
}

}  // namespace comfy::ctl
