#pragma once
// Room check/: `comfy-supervisor check CONFIG`, a config checked as `nginx -t` checks
// nginx's, without starting the supervisor, a segment or ComfyUI. First the config as
// `run` reads it (config/: every key, value and path, the first problem found); then what
// reading cannot tell: that a sandbox can be made, that each ComfyUI checkout is one, that
// the host's script is there, that each pack's environment is there, whole and readable
// (which `run` leaves to each pack's start), that each Python interpreter runs and is new
// enough, that each Python pack imports in its own worker (python_probes.hpp; a pack whose environment
// is stale says so there), and that the pack tool's wheelhouses are there, every problem told.

#include <string>
#include <vector>

namespace comfy::supervisor {

struct CheckReport {
    std::vector<std::string> problems;  // one line each, starting with the config's name
    std::string summary;                // one line, when there is no problem
};

CheckReport check_config(const std::string& file);

// The command: each problem on stderr, or the summary on stdout; the exit status, 0 for a
// good config and 2 otherwise.
int run_check_command(const std::string& file);

}  // namespace comfy::supervisor
