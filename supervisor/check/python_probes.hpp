#pragma once
// What `check` asks of a participant's Python: that its interpreter runs, as the supervisor
// would start it (its environment and working directory), and is new enough for the
// package comfy_supervisor; and that a pack in the "python" form imports in its worker,
// through the worker's own --describe (docs/PACKS.md), in its sandbox where it has one.
// Each problem is one line without the config's name: "at <JSON pointer>: <what>; <what
// to do>".

#include "supervisor/check/probe.hpp"
#include "supervisor/config/config.hpp"

#include <cstddef>
#include <optional>
#include <string>

namespace comfy::supervisor {

// Whether `command` is a Python interpreter by its name (python, python3, python3.11), so
// that it can be asked its version: any other program is never run by `check`.
bool looks_like_python(const std::string& command);

// Nothing when `interpreter` runs within `limit` with `process`'s environment and working
// directory and is at least the package's Python (pyproject.toml's requires-python);
// otherwise the problem, blamed on `at`.
std::optional<std::string> interpreter_problem(Prober& prober, const PackConfig& process,
                                               const std::string& interpreter, const std::string& at,
                                               Milliseconds limit);

struct ImportOutcome {
    std::optional<std::string> problem;  // blamed on `at`
    std::optional<std::size_t> nodes;    // the node classes described, when the description could be read
};

// `pack`'s worker run with --describe as the supervisor would start it, bounded by `limit`
// (the config's ready_timeout_ms, which bounds a real start's import).
ImportOutcome import_outcome(Prober& prober, const PackConfig& pack, const std::string& at, Milliseconds limit);

}  // namespace comfy::supervisor
