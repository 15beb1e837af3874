#pragma once
// Reads what the supervisor prints on stdout with a workload: a progress line per node
// ("prompt K/N  node J/M  pack/node") and, once it has stopped, the summary
// (supervisor/ops/summary.cpp).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace comfy::soak {

struct RunSummary {
    std::uint32_t prompts_run = 0;
    std::uint32_t prompts_total = 0;
    std::uint32_t prompts_failed = 0;
    std::uint32_t nodes_retried = 0;
    std::uint32_t restarts = 0;
    std::uint32_t admissions = 0;  // asked
    std::uint32_t granted = 0;
    std::uint32_t refused = 0;
    std::uint64_t withdrawn = 0;
    std::uint64_t unanswered = 0;
    std::uint32_t evictions = 0;
};

// The summary in `output`; nothing when it has none (the supervisor was killed) or a
// line of it cannot be read.
std::optional<RunSummary> read_summary(const std::vector<std::string>& output);

// The prompts started, by their progress lines: the highest K of "prompt K/N" (prompts
// run one after another).
std::uint32_t prompts_started(const std::vector<std::string>& output);

}  // namespace comfy::soak
