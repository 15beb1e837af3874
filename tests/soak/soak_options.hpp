#pragma once
// The soak's command line: comfy-soak [--seconds N] [--seed S] [--json] [--keep-logs]

#include "shared/command_line.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace comfy::soak {

struct SoakOptions {
    unsigned seconds = 60;
    std::optional<std::uint64_t> seed;  // drawn at random when not given, and printed first
    bool json = false;                  // the report as one JSON object on stdout
    bool keep_logs = false;             // keep the supervisors' logs even when nothing broke
    std::optional<std::string> print;   // --help or --version: this text instead of a run
};

using cli::UsageError;

const char* soak_usage() noexcept;

// Throws UsageError with one line saying what is wrong.
SoakOptions parse_soak_options(const std::vector<std::string>& args);

}  // namespace comfy::soak
