#pragma once
// comfyctl events as text: one event a line, its time of day (UTC, as the log), kind and
// pack in columns, then its text, wrapped under itself to fit `width` columns.

#include <nlohmann/json.hpp>

#include <string>

namespace comfy::ctl {

inline constexpr std::size_t kEventsWidth = 100;

// The heading line, newline included.
std::string events_heading();

// One event of the journal, as the control socket sends it (supervisor/ops/log/event_journal.hpp's
// to_json), newline included. Fields missing or of the wrong type print as "?".
std::string event_text(const nlohmann::json& event, std::size_t width = kEventsWidth);

}  // namespace comfy::ctl
