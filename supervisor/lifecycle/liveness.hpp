#pragma once
// Whether a participant that is up still lives as it should, checked at every heartbeat
// period: its heartbeat moves within the time-out, its ring to the supervisor holds only
// what its writer can have meant, and its census is readable and of this life. Each check
// says why not, for the line that stops it.

#include "shared/records.hpp"
#include "supervisor/lifecycle/worker_process.hpp"

#include <chrono>
#include <optional>
#include <string>

namespace comfy::supervisor {

// Notes a heartbeat that moved since the last check; says "hung" once none has for `timeout`.
std::optional<std::string> heartbeat_problem(WorkerProcess& worker, std::chrono::steady_clock::time_point now,
                                             std::chrono::milliseconds timeout);

// Garbage in an idle worker's ring is found here, within a period, not at its next message;
// a census of `status` counts against it when it is unreadable or stale twice in a row.
std::optional<std::string> shared_memory_problem(WorkerProcess& worker, CensusStatus status);

}  // namespace comfy::supervisor
