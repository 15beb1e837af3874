#include "supervisor/ctl/ctl_options.hpp"

#include "ipc/shm_segment.hpp"

#include <optional>

namespace comfy::ctl {

const char* usage_line() noexcept { return "usage: comfyctl [--instance NAME] workers|census|ledger|free|retry [--json]"; }

std::string help_text() {
    return std::string(usage_line()) +
           "\n"
           "\n"
           "Reads a running supervisor's shared-memory segment; never writes to it and never\n"
           "waits on the supervisor or its workers.\n"
           "\n"
           "commands:\n"
           "  workers          one row per participant: slot, name, kind, pid, generation,\n"
           "                   state, restarts, last exit, age\n"
           "  census           what each participant holds (pinned, device, evicted, allocator,\n"
           "                   cast buffers, RSS, last node, heartbeat) and the device's use\n"
           "  ledger           every model held on a device: owner, size, how much is loaded,\n"
           "                   references, most recently loaded first\n"
           "  free             ask every worker to release all it holds (models, pins); a busy\n"
           "                   worker does so when its node ends\n"
           "  retry            restart the packs marked failed after too many restarts\n"
           "options:\n"
           "  --instance NAME  the supervisor instance (default: default)\n"
           "  --json           one JSON object with raw integers instead of a table\n"
           "  --help, -h       this text\n"
           "\n"
           "exit status: 0 done, 1 the segment could not be read, 2 bad command line\n";
}

namespace {
std::optional<Command> command_named(const std::string& word) {
    if (word == "workers") return Command::workers;
    if (word == "census") return Command::census;
    if (word == "ledger") return Command::ledger;
    if (word == "free") return Command::free;
    if (word == "retry") return Command::retry;
    return std::nullopt;
}
}  // namespace

Options parse_options(const std::vector<std::string>& args) {
    Options options;
    std::optional<Command> command;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        if (arg == "--help" || arg == "-h") {
            options.help = true;
            return options;
        }
        if (arg == "--json") {
            options.json = true;
        } else if (arg == "--instance") {
            if (i + 1 >= args.size() || args[i + 1].empty() || args[i + 1].front() == '-') {
                throw UsageError("--instance needs a NAME");
            }
            options.instance = args[++i];
        } else if (arg.rfind("--instance=", 0) == 0) {
            options.instance = arg.substr(std::string("--instance=").size());
            if (options.instance.empty()) throw UsageError("--instance needs a NAME");
        } else if (!arg.empty() && arg.front() == '-') {
            throw UsageError("unknown option '" + arg + "'");
        } else if (const auto named = command_named(arg)) {
            if (command) throw UsageError("one command at a time, got '" + arg + "' after another");
            command = named;
        } else {
            throw UsageError("unknown command '" + arg + "'");
        }
    }
    if (!command) throw UsageError("no command given");
    options.command = *command;
    try {
        (void)ipc::segment_name(options.instance);
    } catch (const ipc::SegmentError& error) {
        throw UsageError(error.what());
    }
    return options;
}

}  // namespace comfy::ctl
