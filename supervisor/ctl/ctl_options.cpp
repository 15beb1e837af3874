#include "supervisor/ctl/ctl_options.hpp"

#include "ipc/shm_segment.hpp"
#include "shared/byte_size.hpp"
#include "shared/message_payloads.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <sstream>

namespace comfy::ctl {

namespace {

namespace po = cli::po;

// What a command takes beyond --instance, --help and --version.
enum Takes : unsigned {
    kNothing = 0,
    kJson = 1,
    kFollow = 2,
    kPins = 4,
    kName = 8,
    kOptionalName = 16,
    kFailures = 32,
    kToolArgs = 64,  // pack, env, adopt: the words are the Python tool's, read by the tool
};

struct CommandSpec {
    Command command;
    const char* name;
    unsigned takes;
    const char* summary;  // one line of the program's help (after the name and its NAME)
    const char* about;    // the command's own help
};

constexpr std::array<CommandSpec, 14> kCommands{{
    {Command::workers, "workers", kJson, "one row per participant: state, pid, restarts, last exit",
     "One row per participant: slot, name, kind, pid, generation, state, restarts, last\n"
     "exit, age. Read from the segment; works while the supervisor is stopped (SIGSTOP).\n"},
    {Command::census, "census", kJson, "what each participant holds, and the device's use",
     "What each participant holds (device, pinned memory, evictions, the allocator, cast\n"
     "buffers, RSS, last node, heartbeat) and the device's use; read from the segment.\n"
     "--json adds the pin ceiling and errors, the active parts, churn and the prompt epoch.\n"},
    {Command::ledger, "ledger", kJson, "every model on a device: owner, size, how much is loaded",
     "Every model held on a device: owner, size, how much is loaded, references, most\n"
     "recently loaded first; read from the segment.\n"},
    {Command::top, "top", kNothing, "the census live, refreshed every second (q quits)",
     "The census live in the terminal, refreshed every second: per participant its state,\n"
     "device, pinned and cast-buffer bytes, last node, and a bar of its device use against\n"
     "the device. q (or Ctrl-C) quits; the terminal is restored.\n"},
    {Command::events, "events", kJson | kFollow | kFailures, "what happened: spawns, deaths, admissions, releases",
     "The supervisor's journal: spawns, readiness, deaths, restarts, failures, admissions\n"
     "with their waits, evictions, releases, operator actions (the last 1000). With\n"
     "--failures, only what went wrong (deaths nobody asked for, restarts, packs given up\n"
     "on, refused admissions, deaf packs: the last 1000 of those, kept apart so that routine\n"
     "events never push them out). With --follow, new events as they happen, until Ctrl-C.\n"
     "--json prints JSON Lines: one object per event, as GET /events has them\n"
     "(docs/METRICS.md), one per line.\n"},
    {Command::free, "free", kNothing, "every worker releases all it holds",
     "Asks every worker to release all it holds (models, pins, cast buffers); a busy one\n"
     "does so when its node ends. The same as the supervisor's SIGUSR1.\n"},
    {Command::retry, "retry", kOptionalName, "restart the packs marked failed (or one)",
     "Restarts the packs marked failed after too many restarts (or that cannot run as\n"
     "configured), their past deaths forgotten by the restart limit (the restart count\n"
     "itself only grows); the same as the supervisor's SIGHUP. With NAME, that pack alone\n"
     "(as comfyctl start NAME).\n"},
    {Command::restart, "restart", kName, "stop a pack's worker, start it again at once",
     "Stops the pack's worker (SIGTERM, SIGKILL after the grace period) and starts it\n"
     "again at once; not counted as a crash. Requests it was running fail as at a death\n"
     "and are retried by the workload. NAME host restarts ComfyUI.\n"},
    {Command::stop, "stop", kName, "stop a pack and keep it stopped",
     "Stops the pack's worker and keeps it stopped (state stopped): requests for it fail\n"
     "at once, saying so, until `comfyctl start NAME`. NAME host stops ComfyUI itself;\n"
     "the packs keep running.\n"},
    {Command::start, "start", kName, "start a stopped or failed pack",
     "Starts a pack that is stopped or failed, its past deaths forgotten by the restart\n"
     "limit (the restart count itself only grows).\n"},
    {Command::release, "release", kName | kPins, "a full release to one pack (--pins: pins only)",
     "Asks one pack for a full release (models, pins, cast buffers); with --pins, to\n"
     "release BYTES of pinned host memory only. A busy pack does so when its node ends;\n"
     "`comfyctl events` shows what it freed.\n"},
    {Command::pack, "pack", kToolArgs, "isolate a pack: build its environment, add it to the config",
     "Builds a Python pack's own environment from what the pack declares (requirements.txt,\n"
     "pyproject.toml, comfy-env.toml, pyisolate.yaml) with ComfyUI's torch kept, checks that\n"
     "the pack imports there, and adds the pack to the config (add); takes it out again\n"
     "(remove). Runs python3 -m comfy_supervisor.tools pack with these words (python3 from\n"
     "PATH, or $COMFY_SV_TOOL_PYTHON); its options and exit statuses: comfyctl pack --help.\n"
     "It needs no running supervisor and takes no --instance (docs/ENVIRONMENTS.md).\n"
     "pack check DIR estimates, from the pack's source alone, which node classes can run\n"
     "isolated (docs/PACKS.md).\n"},
    {Command::env, "env", kToolArgs, "the pack environments: which config uses each, remove unused ones",
     "Lists the environments comfyctl pack add and adopt built, with the configs and packs\n"
     "that name each (list), and removes those no config on the machine names (gc,\n"
     "--dry-run to see what would go). Runs python3 -m comfy_supervisor.tools env with these\n"
     "words; its options: comfyctl env --help (docs/ENVIRONMENTS.md).\n"},
    {Command::adopt, "adopt", kToolArgs, "isolate an installed ComfyUI's custom nodes in one command",
     "Reads each folder of COMFYUI_DIR/custom_nodes, decides for each pack to isolate it,\n"
     "group it with the packs it shares types with, or keep it in ComfyUI's process (saying\n"
     "why), builds the environments, writes the config and checks it. --dry-run prints the\n"
     "plan and writes nothing. Runs python3 -m comfy_supervisor.tools adopt with these words;\n"
     "its options: comfyctl adopt --help (docs/ADOPTING.md).\n"},
}};

const CommandSpec* spec_named(const std::string& word) {
    const auto found = std::find_if(kCommands.begin(), kCommands.end(), [&](const auto& s) { return word == s.name; });
    return found == kCommands.end() ? nullptr : &*found;
}

const CommandSpec& spec_of(Command command) {
    return *std::find_if(kCommands.begin(), kCommands.end(), [&](const auto& s) { return s.command == command; });
}

// The options a command takes (all of them, for parsing, with every Takes flag).
po::options_description options_for(unsigned takes) {
    po::options_description options("options");
    options.add_options()("instance", po::value<std::string>()->value_name("NAME"),
                          "the supervisor instance (default: default)");
    if (takes & kJson) options.add_options()("json", po::bool_switch(), "JSON with raw integers instead of a table");
    if (takes & kFollow) options.add_options()("follow,f", po::bool_switch(), "keep printing new events until Ctrl-C");
    if (takes & kFailures) {
        options.add_options()("failures", po::bool_switch(),
                              "only what went wrong: deaths, restarts, failures, refusals");
    }
    if (takes & kPins) {
        options.add_options()("pins", po::value<std::string>()->value_name("BYTES"),
                              "release this much pinned memory only (\"512MiB\" or a number of bytes)");
    }
    cli::add_help_and_version(options);
    return options;
}

constexpr const char* kExits =
    "exit status:\n"
    "  0   done\n"
    "  1   the segment could not be read, the supervisor could not be reached or did\n"
    "      not answer, or it refused the action (the line says why)\n"
    "  2   bad command line, or a NAME the supervisor has no pack of (the line lists them)\n";

std::uint64_t pins_of(const std::string& text) {
    std::uint64_t bytes = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), bytes);
    const bool plain = error == std::errc{} && end == text.data() + text.size();
    if (!plain) bytes = parse_byte_size(text).value_or(0);
    if (bytes == 0 || bytes > kMaxBytes) {
        throw UsageError("--pins expects a size from 1 B to " + format_byte_size(kMaxBytes) +
                         " (\"512MiB\" or a number of bytes), found '" + text + "'");
    }
    return bytes;
}

// The option's name if the command does not take it but it was given.
std::optional<std::string> option_not_taken(const po::variables_map& values, unsigned takes) {
    if (!(takes & kJson) && values["json"].as<bool>()) return "--json";
    if (!(takes & kFollow) && values["follow"].as<bool>()) return "--follow";
    if (!(takes & kFailures) && values["failures"].as<bool>()) return "--failures";
    if (!(takes & kPins) && values.count("pins")) return "--pins";
    return std::nullopt;
}

Options parse_words(const std::vector<std::string>& args) {
    po::options_description all = options_for(kJson | kFollow | kPins | kFailures);
    all.add_options()("words", po::value<std::vector<std::string>>());
    const auto values = cli::parse(args, all, "words");
    const auto words = values.count("words") ? values["words"].as<std::vector<std::string>>() : std::vector<std::string>{};
    Options options;
    const CommandSpec* spec = nullptr;
    if (!words.empty()) {
        spec = spec_named(words.front());
        if (spec == nullptr) throw UsageError("unknown command '" + words.front() + "'");
        options.command = spec->command;
        options.command_given = true;
    }
    options.help = values.count("help") > 0;
    options.version = values.count("version") > 0;
    if (options.help || options.version) return options;
    if (spec == nullptr) throw UsageError("no command given");
    const std::string see = std::string("; see comfyctl ") + spec->name + " --help";
    if (spec->takes & kToolArgs) {
        throw UsageError(std::string(spec->name) + " comes first and takes no --instance: comfyctl " + spec->name +
                         " ARGS..." + see);
    }
    try {
        if (const auto option = option_not_taken(values, spec->takes)) {
            throw UsageError(*option + " does not apply to '" + spec->name + "'");
        }
        const bool optional_name = (spec->takes & kOptionalName) && words.size() >= 2;
        const std::size_t wanted = (spec->takes & kName) || optional_name ? 2 : 1;
        if (words.size() < wanted) throw UsageError(std::string(spec->name) + " needs a pack NAME");
        if (words.size() > wanted) {
            throw spec_named(words[wanted]) ? UsageError("one command at a time, got '" + words[wanted] + "' after another")
                                            : UsageError("unexpected argument '" + words[wanted] + "'");
        }
        if (wanted == 2) options.pack = words[1];
        options.json = values["json"].as<bool>();
        options.follow = values["follow"].as<bool>();
        options.failures = values["failures"].as<bool>();
        if (values.count("pins")) options.pins = pins_of(values["pins"].as<std::string>());
        options.instance = cli::value_or(values, "instance", options.instance);
        // `--instance --json`: Boost takes the next word as the value; no instance starts with a dash.
        if (options.instance.empty() || options.instance.front() == '-') throw UsageError("--instance needs a NAME");
        try {
            (void)ipc::segment_name(options.instance);
        } catch (const ipc::SegmentError& error) {
            throw UsageError(error.what());
        }
    } catch (const UsageError& error) {
        throw UsageError(error.what() + see);
    }
    return options;
}

}  // namespace

const char* usage_line() noexcept { return "usage: comfyctl [--instance NAME] COMMAND [NAME] [options]"; }

const char* command_name(Command command) noexcept { return spec_of(command).name; }

bool runs_python_tool(Command command) noexcept { return (spec_of(command).takes & kToolArgs) != 0; }

std::string help_text(const Options& options) {
    std::ostringstream out;
    if (options.command_given) {
        const auto& spec = spec_of(options.command);
        // Reached by `comfyctl --help pack` alone: `comfyctl pack --help` is the tool's.
        if (spec.takes & kToolArgs) {
            return "usage: comfyctl " + std::string(spec.name) + " ...\n\n" + spec.about;
        }
        out << "usage: comfyctl [--instance NAME] " << spec.name << ((spec.takes & kName) ? " NAME" : "")
            << ((spec.takes & kOptionalName) ? " [NAME]" : "")
            << ((spec.takes & kJson) ? " [--json]" : "") << ((spec.takes & kFollow) ? " [--follow]" : "")
            << ((spec.takes & kFailures) ? " [--failures]" : "")
            << ((spec.takes & kPins) ? " [--pins BYTES]" : "") << "\n\n";
        out << spec.about << options_for(spec.takes) << "\n" << kExits;
        return out.str();
    }
    out << usage_line() << "\n\n"
        << "Reads a running supervisor's shared-memory segment (never writing to it, never\n"
           "waiting on the supervisor), and asks the supervisor for actions over its control\n"
           "socket, which only its own user can reach (docs/SECURITY.md).\n\n"
           "commands:\n";
    for (const auto& spec : kCommands) {
        std::string name = std::string(spec.name) + ((spec.takes & kName) ? " NAME" : "") +
                           ((spec.takes & kOptionalName) ? " [NAME]" : "") + ((spec.takes & kToolArgs) ? " ..." : "");
        name.resize(std::max<std::size_t>(name.size() + 1, 15), ' ');
        out << "  " << name << spec.summary << "\n";
    }
    out << "  (comfyctl COMMAND --help for one command's options)\n"
        << options_for(kJson | kFollow | kPins | kFailures) << "\n"
        << kExits;
    return out.str();
}

Options parse_options(const std::vector<std::string>& args) {
    if (const CommandSpec* tool = args.empty() ? nullptr : spec_named(args.front());
        tool != nullptr && (tool->takes & kToolArgs)) {
        Options options;
        options.command = tool->command;
        options.command_given = true;
        options.tool_args.assign(args.begin() + 1, args.end());
        return options;
    }
    try {
        return parse_words(args);
    } catch (const UsageError& error) {
        const std::string what = error.what();
        if (what.find("; see comfyctl") != std::string::npos) throw;
        throw UsageError(what + "; see comfyctl --help");
    }
}

}  // namespace comfy::ctl
