#pragma once
// Small text renderings for the table output: ages and exit causes. (Sizes: comfy::format_byte_size.)

#include <cstdint>
#include <string>

namespace comfy::ctl {

// How long ago `started_at_ms` (wall clock, ms since the epoch) was at `now_ms`: "12s",
// "3m", "5h", "2d"; "-" when the start is unknown (0).
std::string age_text(std::uint64_t started_at_ms, std::uint64_t now_ms);

// "exit 3", "signal 9 (SIGKILL)", or "-" when there was no exit yet (status -1, signal 0).
std::string exit_text(std::int32_t last_exit_status, std::int32_t last_exit_signal);

// Milliseconds since the epoch, now.
std::uint64_t wall_clock_ms();

}  // namespace comfy::ctl
