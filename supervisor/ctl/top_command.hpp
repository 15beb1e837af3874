#pragma once
// comfyctl top in the terminal: raw keys (q quits), the alternate screen, a frame a second
// from the segment; the terminal restored however it ends (q, Ctrl-C, SIGTERM, SIGHUP, the
// supervisor going away).

#include <string>

namespace comfy::ctl {

// Runs until quit; the exit status (0 on q or a signal, 1 when the supervisor went away or
// the terminal cannot be used). Failures are one line on stderr, after the terminal is restored.
int run_top(const std::string& instance);

}  // namespace comfy::ctl
