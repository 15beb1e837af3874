#pragma once
// comfy-supervisor's command line: `run` with its options, `check` with its config file,
// `replay` with its trace file, and --help/--version for the program and each command.

#include "shared/command_line.hpp"

#include <optional>
#include <string>
#include <vector>

namespace comfy::supervisor {

struct RunOptions {
    std::string config;
    std::string instance = "default";
    std::optional<std::string> workload;
    std::optional<std::string> record;
    bool keep_running = false;  // after the workload: summary printed, still serving until a signal
};

struct CommandLine {
    enum class Action { run, check, replay, print };  // print: `text` to stdout, exit 0
    Action action = Action::print;
    RunOptions run;
    std::string trace;         // replay's file
    std::string check_config;  // check's file
    std::string text;   // the help or version text, for print
};

// Parses the arguments after the program's name. Throws cli::UsageError whose what() is
// the whole line: the problem and which --help to read.
CommandLine parse_command_line(const std::vector<std::string>& args);

}  // namespace comfy::supervisor
