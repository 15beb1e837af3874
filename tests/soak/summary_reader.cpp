#include "tests/soak/summary_reader.hpp"

#include <algorithm>
#include <cstdio>

namespace comfy::soak {

namespace {

// The first line that starts with `prefix` (after the summary's indent).
const std::string* line_of(const std::vector<std::string>& output, const std::string& prefix) {
    const auto found = std::find_if(output.begin(), output.end(),
                                    [&](const std::string& line) { return line.rfind("  " + prefix, 0) == 0; });
    return found == output.end() ? nullptr : &*found;
}

}  // namespace

std::optional<RunSummary> read_summary(const std::vector<std::string>& output) {
    if (std::find(output.begin(), output.end(), "summary") == output.end()) return std::nullopt;
    RunSummary s;
    unsigned long long withdrawn = 0;
    unsigned long long unanswered = 0;
    unsigned ignored = 0;
    const auto* prompts = line_of(output, "prompts run ");
    const auto* nodes = line_of(output, "nodes run ");
    const auto* processes = line_of(output, "processes started ");
    const auto* admissions = line_of(output, "admissions ");
    const auto* answered = line_of(output, "answered ");
    const auto* evictions = line_of(output, "evictions ");
    const bool read =
        prompts && std::sscanf(prompts->c_str(), " prompts run %u of %u (%u failed", &s.prompts_run, &s.prompts_total,
                               &s.prompts_failed) == 3 &&
        nodes && std::sscanf(nodes->c_str(), " nodes run %u (%u retried", &ignored, &s.nodes_retried) == 2 &&
        processes && std::sscanf(processes->c_str(), " processes started %u (%u restarts", &ignored, &s.restarts) == 2 &&
        admissions && std::sscanf(admissions->c_str(), " admissions %u", &s.admissions) == 1 &&
        answered && std::sscanf(answered->c_str(), " answered %u granted, %u refused, %llu withdrawn (the asker left first), %llu",
                                &s.granted, &s.refused, &withdrawn, &unanswered) == 4 &&
        evictions && std::sscanf(evictions->c_str(), " evictions %u", &s.evictions) == 1;
    if (!read) return std::nullopt;
    s.withdrawn = withdrawn;
    s.unanswered = unanswered;
    return s;
}

std::uint32_t prompts_started(const std::vector<std::string>& output) {
    std::uint32_t highest = 0;
    for (const auto& line : output) {
        unsigned prompt = 0;
        unsigned total = 0;
        if (std::sscanf(line.c_str(), "prompt %u/%u  node", &prompt, &total) == 2) highest = std::max(highest, prompt);
    }
    return highest;
}

}  // namespace comfy::soak
