// Reads the keys that say how a process starts and restarts, the same for a pack's worker
// and the ComfyUI host: its command and args, the environment it is given (env) and
// passed (env_allowlist), its working directory, restart policy and sandbox. The whole
// command line is then measured as execve would, so that one exec refuses is refused at
// load, naming the pack, rather than at every start.

#include "shared/byte_size.hpp"
#include "supervisor/config/sections.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

namespace comfy::supervisor::config_loader {

namespace {

constexpr Range kBackoffMs{0, 3'600'000};
constexpr Range kMaxRestarts{0, 1000};
constexpr Range kRestartWindowMs{1, 86'400'000};

constexpr std::string_view kReservedEnvPrefix = "COMFY_SV_";
// What the supervisor adds to a child's environment at spawn (worker_environment.hpp):
// at most thirteen COMFY_SV_* variables (ten for every participant, three more for one
// that bridges), the longest a library path (PATH_MAX) and an instance name (48
// characters), with their pointers. Kept free when a config's command line is measured.
constexpr std::size_t kSupervisorEnvBytes = 8 * 1024;
constexpr std::size_t kSupervisorEnvCount = 13;

bool is_env_name(std::string_view name) {
    const auto letter_or_underscore = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
    return !name.empty() && letter_or_underscore(name.front()) &&
           std::all_of(name.begin() + 1, name.end(), [&](char c) { return letter_or_underscore(c) || (c >= '0' && c <= '9'); });
}

// What execve takes, as Linux counts it (fs/exec.c): each string with its NUL at most
// MAX_ARG_STRLEN (32 pages), and all of them (the file name, the arguments, the
// environment) with a pointer each within a quarter of the stack limit, never more than
// 6 MiB (three quarters of _STK_LIM). sysconf(_SC_ARG_MAX) is that quarter (huge for an
// unlimited stack, hence the 6 MiB).
struct ExecLimits {
    std::size_t string_bytes;
    std::size_t total_bytes;
};

ExecLimits exec_limits() {
    const long page = ::sysconf(_SC_PAGESIZE);
    const long arg_max = ::sysconf(_SC_ARG_MAX);
    constexpr std::size_t kMostTotal = std::size_t{6} << 20;
    return {32 * static_cast<std::size_t>(page > 0 ? page : 4096),
            arg_max > 0 ? std::min(static_cast<std::size_t>(arg_max), kMostTotal) : std::size_t{128} * 1024};
}

void check_env_name(const ConfigReader& reader, const std::string& name, const Pointer& at) {
    if (!is_env_name(name)) reader.fail(at, "a variable name of [A-Za-z_][A-Za-z0-9_]*", describe_json_value(name));
    if (name.starts_with(kReservedEnvPrefix)) {
        reader.fail(at,
                    "a variable name not starting with " + std::string(kReservedEnvPrefix) +
                        " (reserved for the supervisor)",
                    describe_json_value(name));
    }
}

std::vector<std::string> read_env_allowlist(const ConfigReader& reader, const Node& node) {
    if (!node.value.is_array()) reader.fail(node.at, "a list of variable names", describe_json_value(node.value));
    std::vector<std::string> names;
    for (std::size_t index = 0; index < node.value.size(); ++index) {
        const Node entry{node.value[index], node.at / index};
        names.push_back(reader.read_string(entry, "a variable name"));
        check_env_name(reader, names.back(), entry.at);
    }
    return names;
}

std::map<std::string, std::string> read_env(const ConfigReader& reader, const Node& node,
                                            const std::vector<std::string>& allowlist) {
    if (!node.value.is_object()) {
        reader.fail(node.at, "an object of variable names and string values", describe_json_value(node.value));
    }
    std::map<std::string, std::string> env;
    for (const auto& item : node.value.items()) {
        const Node entry{item.value(), node.at / item.key()};
        check_env_name(reader, item.key(), entry.at);
        // Which of the two would win is a question the config should not raise.
        if (std::find(allowlist.begin(), allowlist.end(), item.key()) != allowlist.end()) {
            reader.fail(entry.at, "a variable not also in env_allowlist", describe_json_value(item.key()));
        }
        env.emplace(item.key(), reader.read_string(entry, "a string"));
    }
    return env;
}

RestartPolicy read_restart(const ConfigReader& reader, const Node& node) {
    reader.expect_object(node, {"initial_backoff_ms", "max_backoff_ms", "max_restarts", "window_ms"});
    RestartPolicy restart;
    if (const auto initial = member(node, "initial_backoff_ms")) {
        restart.initial_backoff = reader.read_ms(*initial, kBackoffMs);
    }
    const auto max_backoff = member(node, "max_backoff_ms");
    if (max_backoff) restart.max_backoff = reader.read_ms(*max_backoff, kBackoffMs);
    if (const auto restarts = member(node, "max_restarts")) {
        restart.max_restarts = static_cast<std::uint32_t>(reader.read_unsigned(*restarts, kMaxRestarts));
    }
    if (const auto window = member(node, "window_ms")) restart.window = reader.read_ms(*window, kRestartWindowMs);
    if (restart.max_backoff < restart.initial_backoff) {
        const std::string max_text = std::to_string(restart.max_backoff.count());
        reader.fail(node.at / "max_backoff_ms",
                    "at least initial_backoff_ms (" + std::to_string(restart.initial_backoff.count()) + ")",
                    max_backoff ? describe_json_value(max_backoff->value) : max_text + " (the default)");
    }
    return restart;
}

// A command line that execve refuses (E2BIG) would be accepted here and then fail at
// every start until the pack is marked failed; it is refused now, naming the pack.
void check_exec_size(const ConfigReader& reader, const Node& node, const PackConfig& process) {
    const ExecLimits limits = exec_limits();
    std::size_t bytes = kSupervisorEnvBytes + (process.command.size() + 1);  // execve copies the file name too
    std::size_t strings = kSupervisorEnvCount;
    const auto add = [&](std::size_t length, const Pointer& at, const std::string& shown) {
        if (length + 1 > limits.string_bytes) {
            reader.fail(at,
                        "a string of at most " + format_byte_size_exact(limits.string_bytes - 1) +
                            " (the most exec takes in one argument or variable)",
                        shown + " (" + std::to_string(length) + " bytes)");
        }
        bytes += length + 1;
        ++strings;
    };
    // A Python pack's command line is made from its python section: blame that.
    const auto made_at = [&](const Pointer& given) { return process.python ? node.at / "python" : given; };
    add(process.command.size(), made_at(node.at / "command"), describe_json_value(process.command));  // argv[0]
    for (std::size_t i = 0; i < process.args.size(); ++i) {
        add(process.args[i].size(), made_at(node.at / "args" / i), describe_json_value(process.args[i]));
    }
    for (std::size_t i = 0; i < process.env_allowlist.size(); ++i) {
        // Passed on from the supervisor's own environment, as it is now.
        const char* value = std::getenv(process.env_allowlist[i].c_str());
        if (value == nullptr) continue;
        add(process.env_allowlist[i].size() + 1 + std::strlen(value), node.at / "env_allowlist" / i,
            describe_json_value(process.env_allowlist[i]));
    }
    for (const auto& [key, value] : process.env) {
        // A Python pack's PYTHONPATH is the config's only where its env gives one.
        const auto env = member(node, "env");
        const bool ours = process.python && key == kPythonPathVariable && !(env && env->value.contains(key));
        add(key.size() + 1 + value.size(), ours ? node.at / "python" : node.at / "env" / key,
            describe_json_value(value));
    }
    bytes += strings * sizeof(char*);
    if (bytes >= limits.total_bytes) {
        reader.fail(node.at,
                    "a command, args and environment that exec takes: at most " +
                        format_byte_size_exact(limits.total_bytes) + " all told (ARG_MAX), " +
                        format_byte_size_exact(kSupervisorEnvBytes) + " of it kept for the supervisor's variables",
                    std::to_string(bytes) + " bytes for " +
                        (node.at.to_string() == "/comfyui" ? std::string("the ComfyUI host")
                                                           : "pack \"" + process.name + "\""));
    }
}

}  // namespace

void read_command_line(const ConfigReader& reader, const Node& node, PackConfig& process, std::string_view what) {
    process.command = reader.read_command(reader.required(node, "command", what));
    if (const auto args = member(node, "args")) process.args = reader.read_args(*args);
}

void read_process(const ConfigReader& reader, const Node& node, PackConfig& process) {
    if (const auto allowlist = member(node, "env_allowlist")) {
        process.env_allowlist = read_env_allowlist(reader, *allowlist);
    }
    if (const auto env = member(node, "env")) process.env = read_env(reader, *env, process.env_allowlist);
    if (process.python) add_python_path(reader, node, process);
    process.working_directory = reader.folder().string();
    if (const auto folder = member(node, "working_directory")) {
        process.working_directory = reader.read_directory(*folder);
    }
    if (const auto restart = member(node, "restart")) process.restart = read_restart(reader, *restart);
    if (const auto sandbox = member(node, "sandbox")) {
        process.sandbox = read_sandbox(reader, *sandbox, process.working_directory);
    }
    if (process.python && process.sandbox) add_python_sandbox_paths(reader, node, process);
    if (process.python) {
        process.args = pack_worker_args(process, (reader.folder() / fs::path(reader.file()).filename()).string());
    }
    check_exec_size(reader, node, process);
}

}  // namespace comfy::supervisor::config_loader
