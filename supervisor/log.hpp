#pragma once
// The supervisor's log: one line per event on stderr, prefixed with the program name and
// the time since start, so an operator can follow a run and grep it.

#include <string>

namespace comfy::supervisor {

void log_line(const std::string& text);

}  // namespace comfy::supervisor
