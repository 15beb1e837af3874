#pragma once
// GET /metrics: the supervisor's figures in Prometheus's text exposition format. The
// Supervisor gathers them; this file only writes them, each family's samples after its
// own HELP and TYPE lines, as the format requires.

#include "supervisor/supervisor.hpp"

#include <string>
#include <vector>

namespace comfy::supervisor {

struct WorkerMetrics {
    std::string pack;
    bool up;  // ready or busy
    std::uint32_t restarts;
};

struct MetricsInput {
    Supervisor::Totals totals;
    Bytes device_total = 0;
    Bytes device_free = 0;
    std::size_t ledger_models = 0;
    std::vector<WorkerMetrics> workers;
    std::vector<Supervisor::CensusRow> census;
};

std::string metrics_text(const MetricsInput& in);

}  // namespace comfy::supervisor
