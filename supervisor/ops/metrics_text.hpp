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
#include <string_view>
#include <vector>

namespace comfy::supervisor {

struct ParticipantMetrics {
    std::string pack;
    ParticipantState state;
    std::uint32_t restarts;
    bool deaf;  // passed over by the arbiter until it answers
};

// One model of the ledger, by its owner's pack and its name (docs/METRICS.md says what the
// labels carry and how many series they make).
struct ModelMetrics {
    std::string pack;
    std::uint64_t model_id;
    std::string name;  // may be empty
    Bytes total;
    std::optional<Bytes> loaded;  // absent: not reported yet
};

struct MetricsInput {
    Totals totals;
    Bytes device_total = 0;
    Bytes device_free = 0;
    Bytes device_reserve = 0;
    std::size_t ledger_models = 0;
    std::vector<ParticipantMetrics> participants;
    std::vector<ModelMetrics> models;
    std::vector<CensusRow> census;
    HostFigures host;
    AdmissionWaits::Histogram admission_waits;
    Refusals refusals;
};

std::string metrics_text(const MetricsInput& in);

// `text` as a label's value inside its double quotes: backslash, double quote and line
// feed escaped, as the exposition format requires.
std::string label_value(std::string_view text);

}  // namespace comfy::supervisor
