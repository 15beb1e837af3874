#pragma once
// comfyctl top's screen, as text: a heading with the device's total, use, free memory and
// the reserve, then one row per participant (state, device, pinned and cast-buffer bytes,
// last node) ending in a bar of its device use against the device's total, then the models
// loaded last with their owners and names. Pure: the terminal handling is top_command.cpp's.

#include "supervisor/ctl/segment_report.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace comfy::ctl {

struct TopContext {
    std::optional<std::uint64_t> reserve_bytes;  // from the supervisor, when it answered
    std::string clock;                           // the time of day shown in the heading
    std::size_t width = 100;                     // the terminal's columns
    std::uint64_t now_ms = 0;                    // wall clock, for how long a callback lasts (0: not said)
};

// The screen's lines, each ending in a newline, none wider than context.width (at least 60):
// the bar of each row takes the columns the others leave, the names narrowed before it goes.
std::string top_frame(const SegmentReport& report, const TopContext& context);

// The terminal's width as $COLUMNS says it (`columns`, may be null), for a terminal that
// does not answer TIOCGWINSZ; `otherwise` when it names no whole number from 1 to 1000.
std::size_t columns_or(const char* columns, std::size_t otherwise);

}  // namespace comfy::ctl
