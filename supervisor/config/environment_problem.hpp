#pragma once
// Whether a Python pack's environment, as `comfyctl pack add` built it, can run the pack
// now, as the user this process runs as. `comfy-supervisor check` stops on a problem; the
// supervisor asks again before each start of the pack's worker, and a problem fails that
// pack alone: the config is read without looking, so that one deleted or unreadable
// environment never keeps the instance (and ComfyUI) down, and a rebuilt one starts at the
// pack's next retry without restarting the supervisor.

#include "supervisor/config/config.hpp"

#include <string>

namespace comfy::supervisor {

// What `comfyctl pack add` writes last into an environment it built: the mark that it is whole.
inline constexpr const char* kEnvironmentLock = "comfy-env.lock.json";

// What is wrong, by its real cause: not there, there but not readable by this user (a
// folder, the lock or the interpreter), begun and never finished (no lock), or finished
// without its interpreter (a link to a Python that was removed).
enum class EnvironmentFault { none, missing, unreadable, unfinished, no_interpreter };

struct EnvironmentState {
    EnvironmentFault fault = EnvironmentFault::none;
    std::string line;  // what is wrong and what to do, in one line; empty for none
};

// `pack`: a Python pack whose config names an environment.
EnvironmentState environment_state(const PackConfig& pack);

// The user this process runs as, for a line about what it cannot read: "NAME (uid N)".
std::string this_user();

}  // namespace comfy::supervisor
