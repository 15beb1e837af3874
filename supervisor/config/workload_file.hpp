#pragma once
// A workload file: prompts to run through the workers, each a list of nodes naming the
// pack whose worker runs it (docs/CONFIG.md). Read and checked whole before anything runs.

#include "supervisor/config/config.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace comfy::supervisor {

struct WorkloadNode {
    std::string pack;
    std::string node;
};

struct Workload {
    std::vector<std::vector<WorkloadNode>> prompts;  // run in order, `repeat` times
    std::uint32_t repeat = 1;
    // All prompts of a round at once (each still node after node), as when several
    // packs' nodes overlap; otherwise one prompt after another.
    bool parallel = false;
};

// Reads a workload file (a regular file of at most kMaxJsonFileBytes); throws ConfigError
// (one line: file, JSON path or line and column, expected, found).
Workload load_workload(const std::string& path, const Config& config);

// The same from text already read; `path` names it in messages.
Workload load_workload_text(std::string_view text, const std::string& path, const Config& config);

}  // namespace comfy::supervisor
