#pragma once
// comfyctl's command line: [--instance NAME] workers|census|ledger|free|retry [--json], options anywhere.

#include <stdexcept>
#include <string>
#include <vector>

namespace comfy::ctl {

enum class Command {
    workers,  // print the participant table
    census,   // print the census and the device's use
    ledger,   // print the machine-wide ledger: every model on a device and its owner
    free,     // ask every worker for a full release (the supervisor's SIGUSR1)
    retry,    // restart the packs marked failed (the supervisor's SIGHUP)
};

struct Options {
    std::string instance = "default";
    Command command = Command::workers;
    bool json = false;
    bool help = false;  // print the usage and stop; nothing else was checked
};

// A command line that cannot be run; what() is one line naming the problem.
class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The one-line usage, without a trailing newline.
const char* usage_line() noexcept;

// The full help text for --help.
std::string help_text();

// Parses the arguments after the program name. Throws UsageError for an unknown command
// or flag, a missing or invalid instance name, or a missing or repeated command.
Options parse_options(const std::vector<std::string>& args);

}  // namespace comfy::ctl
