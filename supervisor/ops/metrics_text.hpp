#pragma once
// GET /metrics: the supervisor's figures in Prometheus's text exposition format. The
// endpoints gather them; this file only writes them, each family's samples after its
// own HELP and TYPE lines, as the format requires. docs/METRICS.md describes every one.

#include "supervisor/memory/admission_waits.hpp"
#include "supervisor/memory/host_memory.hpp"
#include "supervisor/ops/refusals.hpp"
#include "supervisor/ops/supervised.hpp"

#include <optional>
#include <string>
#include <vector>

namespace comfy::supervisor {

struct ParticipantMetrics {
    std::string pack;
    ParticipantState state;
    std::uint32_t restarts;
};

struct MetricsInput {
    Totals totals;
    Bytes device_total = 0;
    Bytes device_free = 0;
    Bytes device_reserve = 0;
    std::size_t ledger_models = 0;
    std::vector<ParticipantMetrics> participants;
    std::vector<CensusRow> census;
    HostFigures host;
    AdmissionWaits::Histogram admission_waits;
    Refusals refusals;
};

std::string metrics_text(const MetricsInput& in);

}  // namespace comfy::supervisor
