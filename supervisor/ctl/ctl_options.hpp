#pragma once
// comfyctl's command line: [--instance NAME] COMMAND [NAME] [options], options anywhere.
// The commands that read the segment, and those that ask the supervisor over its control
// socket (supervisor/ctl/control_protocol.hpp).

#include "shared/command_line.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace comfy::ctl {

enum class Command {
    workers,  // print the participant table
    census,   // print the census and the device's use
    ledger,   // print the machine-wide ledger: every model on a device and its owner
    top,      // the census live in the terminal
    events,   // the supervisor's event journal; --follow streams it
    free,     // ask every worker for a full release (as the supervisor's SIGUSR1)
    retry,    // restart the packs marked failed (as the supervisor's SIGHUP)
    restart,  // stop one pack's worker and start it again at once
    stop,     // stop one pack and keep it stopped
    start,    // start a stopped or failed pack
    release,  // a full release (or, with --pins, a pin release) to one pack
    pack,     // a pack's environment and estimate: the Python tool run with the words that follow
    env,      // the environments on this machine: list them, remove the unused ones (the Python tool)
    adopt,    // an installed ComfyUI's custom nodes isolated (the Python tool)
};

struct Options {
    std::string instance = "default";
    Command command = Command::workers;
    bool json = false;
    bool follow = false;                // events: keep printing new events until interrupted
    bool failures = false;              // events: only the warnings and errors
    std::string pack;                   // restart, stop, start, release, retry (optional): the pack's name
    std::optional<std::uint64_t> pins;  // release --pins: bytes of pinned memory
    bool help = false;                  // print help_text(*this) and stop; nothing else was checked
    bool version = false;               // print the version and stop
    bool command_given = false;         // for help: the command's own help, or the program's
    std::vector<std::string> tool_args; // pack, env, adopt: every word after it, for the Python tool
};

using UsageError = cli::UsageError;

// The one-line usage, without a trailing newline.
const char* usage_line() noexcept;

// The help for --help: the command's own when one was given, else the program's.
std::string help_text(const Options& options = {});

// The command's name as typed: "workers", "release", ...
const char* command_name(Command command) noexcept;

// Whether the command is the Python tool's (pack, env, adopt): its words are the tool's.
bool runs_python_tool(Command command) noexcept;

// Parses the arguments after the program name. Throws UsageError (one line, ending in
// which --help to read) for an unknown command or option, an option the command does not
// take, a missing or extra NAME, a bad --pins or instance name. `pack`, `env` or
// `adopt` as the first word takes every word after it as they are (the Python tool reads
// them, its --help included).
Options parse_options(const std::vector<std::string>& args);

}  // namespace comfy::ctl
