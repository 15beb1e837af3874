#pragma once
// Wall-clock time as the log and the event journal write it.

#include <chrono>
#include <string>

namespace comfy::supervisor {

// "2026-11-30T21:40:01.234Z": ISO 8601 in UTC with milliseconds, so that lines and events
// from machines in other time zones sort together.
std::string utc_timestamp(std::chrono::system_clock::time_point at);

}  // namespace comfy::supervisor
