#pragma once
// The report as JSON for scripts: raw integers, no units, keys in the order below.
// Unknown values (a record that stayed busy) are null, so every entry has the same keys.

#include "supervisor/ctl/segment_report.hpp"

#include <nlohmann/json.hpp>

namespace comfy::ctl {

// {"instance","segment","supervisor_pid","workers":[{slot,status,name,kind,pid,generation,
//  state,deaf,restarts,last_exit_status,last_exit_signal,started_at_ms,busy_since_ms (0 when
//  not busy),in_callback,last_node_name}...]}
nlohmann::ordered_json workers_json(const SegmentReport& report);

// {"instance","segment","supervisor_pid","device":{kind,total_bytes,used_bytes,free_bytes},
//  "census":[{slot,name,generation,status,...the CensusRecord fields...,heartbeat}...]}
nlohmann::ordered_json census_json(const SegmentReport& report);

// {"instance", "segment", "supervisor_pid", "ledger": [{row, status, owner, owner_slot, ...}]}
nlohmann::ordered_json ledger_json(const SegmentReport& report);

}  // namespace comfy::ctl
