#pragma once
// What no restart can cure at a participant's start: a Python pack's environment missing,
// unreadable or unfinished (environment_problem.hpp), its command not there, or an exec
// that failed for good (a script whose interpreter line names a Python that is not there,
// a file that is not a program, a working directory that is gone). The pack is failed at
// the first try, in one line naming the path and the fix, instead of crash-looping through
// its restarts; a crash after its command ran is counted as before (restart_policy.hpp).

#include "supervisor/config/config.hpp"
#include "supervisor/lifecycle/process_spawner.hpp"

#include <optional>
#include <string>

namespace comfy::supervisor {

// Why `pack` cannot be started now, asked before each spawn (so a rebuilt environment
// starts at the pack's next retry); nothing when it can.
std::optional<std::string> start_problem(const PackConfig& pack);

// What `failure` (take_start_failure's) was, for the line that says how a life ended.
std::string start_failure_text(const PackConfig& pack, const StartFailure& failure);

// Whether `failure` would happen again at every try: a path not there, not permitted or
// not a program; never a lack of memory or descriptors, which another try may not meet.
bool start_failure_lasts(const StartFailure& failure);

}  // namespace comfy::supervisor
