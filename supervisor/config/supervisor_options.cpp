#include "supervisor/config/supervisor_options.hpp"

#include <sstream>

namespace comfy::supervisor {

namespace {

namespace po = cli::po;

constexpr const char* kProgram = "comfy-supervisor";
constexpr const char* kRunUsage =
    "usage: comfy-supervisor run --config FILE [--instance NAME] [--workload FILE [--keep-running]] [--record FILE]";
constexpr const char* kReplayUsage = "usage: comfy-supervisor replay TRACE";
constexpr const char* kCheckUsage = "usage: comfy-supervisor check CONFIG";

std::string help_of(const char* usage, const char* about, const po::options_description& options,
                    const char* exits) {
    std::ostringstream out;
    out << usage << "\n\n" << about << "\n" << options << "\nexit status:\n" << exits;
    return out.str();
}

std::string top_help() {
    return std::string(kRunUsage) + "\n   or: comfy-supervisor check CONFIG\n   or: comfy-supervisor replay TRACE\n" +
           "\n"
           "Runs one worker process per ComfyUI custom node pack (and ComfyUI itself, when the\n"
           "config has it) under one event loop, and keeps the machine's shared-memory segment.\n"
           "\n"
           "commands:\n"
           "  run          start the config's packs and run until SIGTERM or SIGINT\n"
           "               (comfy-supervisor run --help)\n"
           "  check        check a config, its paths, interpreters and packs' imports, starting\n"
           "               nothing (comfy-supervisor check --help)\n"
           "  replay       replay recorded arbitration decisions (comfy-supervisor replay --help)\n"
           "options:\n"
           "  -h [ --help ]  print this help and exit\n"
           "  --version      print the version and exit\n"
           "\n"
           "exit status: as each command's --help says; 2 for a bad command line\n";
}

po::options_description run_options() {
    po::options_description options("options");
    options.add_options()("config,c", po::value<std::string>()->value_name("FILE"),
                          "the config (docs/CONFIG.md); required")(
        "instance", po::value<std::string>()->value_name("NAME"),
        "the instance: its segment and control socket (default: default)")(
        "workload", po::value<std::string>()->value_name("FILE"),
        "run these prompts, print a summary and stop (examples/workload.json)")(
        "keep-running", "with --workload: after the summary, keep running (the dashboard, comfyctl) until SIGTERM or "
                        "SIGINT")(
        "record", po::value<std::string>()->value_name("FILE"),
        "write every arbitration event and decision to FILE (docs/TRACE.md)");
    cli::add_help_and_version(options);
    return options;
}

constexpr const char* kRunExits =
    "  0   stopped cleanly: SIGTERM or SIGINT, or a workload with no failed prompt\n"
    "  1   a workload's prompt failed, or an error after start-up (said in one line)\n"
    "  2   bad command line, config, workload or --record file, a CUDA device\n"
    "      configured in a build without CUDA support, or the instance is in use by a\n"
    "      live supervisor\n"
    "  75  the CUDA device is still not usable after the config's device.wait_ms and\n"
    "      the config says stop: try again later (systemd restarts the service)\n";

constexpr const char* kCheckExits =
    "  0   the config is good (one line says what it holds)\n"
    "  2   bad command line, or a problem in the config (one line each)\n";

constexpr const char* kReplayExits =
    "  0   every decision replayed as recorded\n"
    "  1   a decision differed (each difference is printed)\n"
    "  2   bad command line, or the trace cannot be read or is malformed\n";

// The text --help or --version asks a command for, when either was given.
std::optional<std::string> asked_text(const po::variables_map& values, const char* usage, const char* about,
                                      const po::options_description& options, const char* exits) {
    if (values.count("help")) return help_of(usage, about, options, exits);
    if (values.count("version")) return cli::version_line(kProgram) + "\n";
    return std::nullopt;
}

CommandLine parse_run(const std::vector<std::string>& args) {
    const auto options = run_options();
    const auto values = cli::parse(args, options);
    CommandLine line;
    if (const auto text = asked_text(values, kRunUsage,
                                     "Starts the workers of the config's packs (and ComfyUI, when the config has a\n"
                                     "\"comfyui\" section), and runs until SIGTERM or SIGINT, or until the workload "
                                     "ran.\ncomfyctl reads its segment and uses its control socket.\n",
                                     options, kRunExits)) {
        line.text = *text;
        return line;
    }
    line.action = CommandLine::Action::run;
    line.run.config = cli::value_or(values, "config", "");
    if (line.run.config.empty()) throw cli::UsageError("--config is required");
    line.run.instance = cli::value_or(values, "instance", line.run.instance);
    if (values.count("workload")) line.run.workload = values["workload"].as<std::string>();
    if (values.count("record")) line.run.record = values["record"].as<std::string>();
    line.run.keep_running = values.count("keep-running") > 0;
    if (line.run.keep_running && !line.run.workload) throw cli::UsageError("--keep-running needs --workload");
    return line;
}

// A command that takes one FILE (`name` is its positional option's), which goes into `file`
// of the line, whose action is then `action`; or its help or version text.
struct OneFileCommand {
    const char* name;
    const char* usage;
    const char* about;
    const char* exits;
    const char* wrong_count;  // the usage error when there is not one FILE
    CommandLine::Action action;
    std::string CommandLine::*file;
};

CommandLine parse_one_file(const std::vector<std::string>& args, const OneFileCommand& command) {
    po::options_description options("options");
    cli::add_help_and_version(options);
    po::options_description all;
    all.add(options).add_options()(command.name, po::value<std::vector<std::string>>());
    const auto values = cli::parse(args, all, command.name);
    CommandLine line;
    if (const auto text = asked_text(values, command.usage, command.about, options, command.exits)) {
        line.text = *text;
        return line;
    }
    const auto files =
        values.count(command.name) ? values[command.name].as<std::vector<std::string>>() : std::vector<std::string>{};
    if (files.size() != 1) throw cli::UsageError(command.wrong_count);
    line.action = command.action;
    line.*command.file = files.front();
    return line;
}

const OneFileCommand kReplay{
    "trace", kReplayUsage,
    "Feeds a trace written by `run --record` to the arbiter of this build and compares\n"
    "each decision with the recorded one (docs/TRACE.md). A file whose name starts\n"
    "with a dash goes after `--`.\n",
    kReplayExits, "replay takes one trace file", CommandLine::Action::replay, &CommandLine::trace};

const OneFileCommand kCheck{
    "config", kCheckUsage,
    "Checks a config as `run` would read it, and more, without starting the supervisor,\n"
    "a segment or ComfyUI: every path it names, that each Python interpreter runs and is\n"
    "new enough for the package, and that each Python pack imports in its own interpreter\n"
    "(its worker's --describe; in its sandbox, where it has one). One line per problem on\n"
    "stderr, naming the JSON pointer of the value and what to do; one line on stdout\n"
    "when there is none (docs/CONFIG.md, \"Checking a config\"). CONFIG may also be given\n"
    "as --config CONFIG, as run takes it.\n",
    kCheckExits, "check takes one config file", CommandLine::Action::check, &CommandLine::check_config};

}  // namespace

CommandLine parse_command_line(const std::vector<std::string>& args) {
    const std::string command = args.empty() ? std::string() : args.front();
    const std::vector<std::string> rest(args.begin() + (args.empty() ? 0 : 1), args.end());
    try {
        if (command == "run") return parse_run(rest);
        if (command == "check") return parse_one_file(rest, kCheck);
        if (command == "replay") return parse_one_file(rest, kReplay);
    } catch (const cli::UsageError& error) {
        throw cli::UsageError(std::string(error.what()) + "; see comfy-supervisor " + command + " --help");
    }
    CommandLine line;
    if (command == "--help" || command == "-h") {
        line.text = top_help();
        return line;
    }
    if (command == "--version") {
        line.text = cli::version_line(kProgram) + "\n";
        return line;
    }
    const std::string what = command.empty() ? std::string("no command given")
                                              : "unknown command '" + command + "'";
    throw cli::UsageError(what + ", expected 'run', 'check' or 'replay' (" + kRunUsage +
                          "); see comfy-supervisor --help");
}

}  // namespace comfy::supervisor
