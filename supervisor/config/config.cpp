#include "supervisor/config/config.hpp"

#include "shared/byte_size.hpp"
#include "shared/input_file.hpp"
#include "shared/json_errors.hpp"
#include "shared/message_payloads.hpp"
#include "shared/records.hpp"
#include "supervisor/config/install_layout.hpp"
#include "supervisor/config/sections.hpp"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <utility>

namespace comfy::supervisor {

namespace {

using namespace config_loader;

constexpr Range kBackoffMs{0, 3'600'000};
constexpr Range kMaxRestarts{0, 1000};
constexpr Range kRestartWindowMs{1, 86'400'000};

constexpr std::size_t kMaxPackNameLength = kPackNameBytes - 1;  // the record keeps a NUL
constexpr std::string_view kReservedEnvPrefix = "COMFY_SV_";
// What the supervisor adds to a child's environment at spawn (worker_environment.hpp):
// at most thirteen COMFY_SV_* variables (ten for every participant, three more for one
// that bridges), the longest a library path (PATH_MAX) and an instance name (48
// characters), with their pointers. Kept free when a config's command line is measured.
constexpr std::size_t kSupervisorEnvBytes = 8 * 1024;
constexpr std::size_t kSupervisorEnvCount = 13;
// A value arena below a mebibyte holds no image worth passing; above a tebibyte the
// figure is a typo (it is sparse, so the size costs nothing until written).
constexpr Range kArenaBytes{std::uint64_t{1} << 20, std::uint64_t{1} << 40};

constexpr const char* kPythonPathVariable = "PYTHONPATH";
constexpr const char* kPackFolderRule = "a custom node pack's folder (a directory with __init__.py)";

std::string count_of(std::size_t count, std::string_view noun) {
    return std::to_string(count) + " " + std::string(noun) + (count == 1 ? "" : "s");
}

std::string pack_name_rule() {
    return "a pack name of 1 to " + std::to_string(kMaxPackNameLength) + " characters from [A-Za-z0-9_-]";
}

bool is_pack_name(std::string_view name) {
    return !name.empty() && name.size() <= kMaxPackNameLength &&
           std::all_of(name.begin(), name.end(), [](char c) {
               return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
           });
}

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

// Empty when `folder` is what ComfyUI imports as a custom node pack; otherwise why not.
std::string pack_folder_problem(const fs::path& folder) {
    if (auto problem = directory_problem(folder); !problem.empty()) return problem;
    std::error_code error;
    if (!fs::is_regular_file(folder / "__init__.py", error)) return "no __init__.py in it";
    return {};
}

// The first executable `name` in the supervisor's PATH, as a shell would find it now
// (absolute, links kept); empty when there is none.
fs::path find_in_path(std::string_view name) {
    const char* path = std::getenv("PATH");
    std::string_view rest = path != nullptr ? path : "";
    while (true) {
        const auto colon = rest.find(':');
        const std::string_view entry = rest.substr(0, colon);
        std::error_code error;
        const fs::path candidate =
            fs::absolute(fs::path(entry.empty() ? "." : std::string(entry)) / name, error).lexically_normal();
        if (!error && executable_problem(candidate).empty()) return candidate;
        if (colon == std::string_view::npos) return {};
        rest.remove_prefix(colon + 1);
    }
}

// Reads one config file's sections through the ConfigReader it is, so that every check
// fails through fail() (config_reader.hpp).
class Loader : private ConfigReader {
public:
    using ConfigReader::ConfigReader;

    Config load(const json& document, const std::string& file) {
        const Node root{document, Pointer{}};
        expect_object(root, {"device", "limits", "memory", "host", "http", "comfyui", "packs"});
        Config config;
        config.source = file;
        if (const auto device = member(root, "device")) config.device = read_device(*this, *device);
        if (const auto limits = member(root, "limits")) config.limits = read_limits(*this, *limits);
        if (const auto memory = member(root, "memory")) config.memory = read_memory(*this, *memory, config.limits.capacities);
        if (const auto host = member(root, "host")) config.host = read_host(*this, *host);
        if (const auto http = member(root, "http")) config.http = read_http(*this, *http);
        if (const auto comfyui = member(root, "comfyui")) {
            config.comfyui = read_comfyui(*comfyui);
            if (const auto checkout = member(*comfyui, "checkout")) config.comfyui_checkout = read_directory(*checkout);
        }
        checkout_ = config.comfyui_checkout;
        config.packs = read_packs(required(root, "packs", "a list of packs"), config.limits.capacities.participants,
                                  config.comfyui.has_value());
        return config;
    }

private:
    std::vector<PackConfig> read_packs(const Node& node, std::uint32_t participants, bool with_host) const {
        if (!node.value.is_array()) fail(node.at, "a list of packs", describe_json_value(node.value));
        if (node.value.empty()) fail(node.at, "at least one pack", "[]");
        const std::size_t most = participants - 1;  // one participant slot is the ComfyUI host's
        if (node.value.size() > most) {
            fail(node.at,
                 "at most " + count_of(most, "pack") + " (/limits/participants is " + std::to_string(participants) +
                     ", one of them the ComfyUI host)",
                 count_of(node.value.size(), "pack"));
        }
        std::vector<PackConfig> packs;
        std::map<std::string, std::size_t> index_by_name;
        for (std::size_t index = 0; index < node.value.size(); ++index) {
            const Node pack_node{node.value[index], node.at / index};
            PackConfig pack = read_pack(pack_node);
            // The host's name in the participant table and the logs must name one process.
            if (with_host && pack.name == kHostParticipantName) {
                fail(pack_node.at / "name", "a name other than \"" + std::string(kHostParticipantName) +
                                                "\" (the ComfyUI host's, from /comfyui)",
                     describe_json_value(pack.name));
            }
            const auto [first, inserted] = index_by_name.emplace(pack.name, index);
            if (!inserted) {
                fail(pack_node.at / "name", "a name no other pack has",
                     describe_json_value(pack.name) + " (also the name of " + path_text(node.at / first->second) + ")");
            }
            packs.push_back(std::move(pack));
        }
        return packs;
    }

    PackConfig read_pack(const Node& node) const {
        expect_object(node, {"name", "command", "python", "args", "env_allowlist", "env", "working_directory",
                             "restart", "sandbox"});
        PackConfig pack;
        pack.name = read_pack_name(required(node, "name", pack_name_rule()));
        const auto python = member(node, "python");
        if (python && member(node, "command")) fail(node.at, "exactly one of command and python", "both");
        if (!python) {
            read_command_line(node, pack, "the path of an executable file, or a python section");
        } else {
            // The supervisor makes a Python pack's command line; arguments would go where?
            if (const auto args = member(node, "args")) {
                fail(args->at, "no args beside python (the supervisor makes a Python pack's command line)",
                     describe_json_value(args->value));
            }
            read_python(*python, pack);
        }
        read_process(node, pack);
        return pack;
    }

    // The ComfyUI host: a pack's process keys, without a name (it is always the host), and
    // the ComfyUI checkout the Python packs import by default. It always bridges.
    PackConfig read_comfyui(const Node& node) const {
        expect_object(node, {"command", "args", "env_allowlist", "env", "working_directory", "restart", "sandbox",
                             "checkout", "arena_bytes"});
        PackConfig host;
        host.name = kHostParticipantName;
        host.bridges = true;
        if (const auto arena = member(node, "arena_bytes")) host.arena_bytes = read_size(*arena, kArenaBytes);
        read_command_line(node, host, "the path of an executable file");
        read_process(node, host);
        return host;
    }

    // The command and its args, for a process given by command; `what` says what a missing one should be.
    void read_command_line(const Node& node, PackConfig& process, std::string_view what) const {
        process.command = read_command(required(node, "command", what));
        if (const auto args = member(node, "args")) process.args = read_args(*args);
    }

    // The "python" form: the pack's interpreter runs comfy_supervisor.pack_worker on the
    // pack's folder, with the ComfyUI checkout's comfy package on its path.
    void read_python(const Node& node, PackConfig& pack) const {
        expect_object(node, {"pack", "interpreter", "comfyui", "comfyui_args", "arena_bytes", "cuda_ipc"});
        PythonPack python;
        python.pack = read_pack_folder(required(node, "pack", kPackFolderRule));
        if (const auto interpreter = member(node, "interpreter")) {
            python.interpreter = read_command(*interpreter);
        } else {
            python.interpreter = find_in_path("python3").string();
            if (python.interpreter.empty()) {
                fail(node.at / "interpreter",
                     "a Python interpreter: there is no python3 on the supervisor's PATH, so set " +
                         path_text(node.at / "interpreter"),
                     kFoundNothing);
            }
        }
        if (const auto comfyui = member(node, "comfyui")) {
            python.comfyui = read_directory(*comfyui);
        } else if (!checkout_.empty()) {
            python.comfyui = checkout_;
        } else {
            fail(node.at, "a ComfyUI checkout: set /comfyui/checkout or " + path_text(node.at / "comfyui"), kFoundNothing);
        }
        if (const auto arena = member(node, "arena_bytes")) pack.arena_bytes = read_size(*arena, kArenaBytes);
        if (const auto flags = member(node, "comfyui_args")) python.comfyui_args = read_args(*flags);
        if (const auto ipc = member(node, "cuda_ipc")) python.cuda_ipc = read_flag(*ipc);
        pack.command = python.interpreter;
        pack.bridges = true;
        pack.python = std::move(python);
    }

    // A Python pack's command line, once its sandbox is known.
    static std::vector<std::string> pack_worker_args(const PythonPack& python, bool sandboxed) {
        std::vector<std::string> args{"-m", "comfy_supervisor.pack_worker", "--pack", python.pack, "--comfyui",
                                      python.comfyui};
        if (!python.cuda_ipc.value_or(!sandboxed)) args.push_back("--no-cuda-ipc");
        // ComfyUI's own flags (--cpu, --lowvram...), for the worker's comfy package to parse
        // as main.py has it parse them.
        if (!python.comfyui_args.empty()) {
            args.push_back("--");
            args.insert(args.end(), python.comfyui_args.begin(), python.comfyui_args.end());
        }
        return args;
    }

    std::string read_pack_folder(const Node& node) const {
        const fs::path folder = read_path(node, kPackFolderRule);
        if (const auto problem = pack_folder_problem(folder); !problem.empty()) {
            fail(node.at, kPackFolderRule, describe_json_value(node.value) + " (" + folder.string() + ": " + problem + ")");
        }
        return folder.string();
    }

    // What starts and restarts a process, the same for a pack's worker and the host; the
    // command is read already.
    void read_process(const Node& node, PackConfig& process) const {
        if (const auto allowlist = member(node, "env_allowlist")) process.env_allowlist = read_env_allowlist(*allowlist);
        if (const auto env = member(node, "env")) process.env = read_env(*env, process.env_allowlist);
        if (process.python) add_python_path(node, process);
        process.working_directory = folder().string();
        if (const auto folder = member(node, "working_directory")) process.working_directory = read_directory(*folder);
        if (const auto restart = member(node, "restart")) process.restart = read_restart(*restart);
        if (const auto sandbox = member(node, "sandbox")) process.sandbox = read_sandbox(*sandbox, process.working_directory);
        if (process.python) process.args = pack_worker_args(*process.python, process.sandbox.has_value());
        check_exec_size(node, process);
    }

    // Ours first, so that the pack's interpreter finds comfy_supervisor; the pack's own
    // PYTHONPATH after it. One passed through from the supervisor's environment could not
    // be joined at spawn without a rule nobody would guess, so it is refused.
    void add_python_path(const Node& node, PackConfig& pack) const {
        const auto& allowed = pack.env_allowlist;
        if (const auto found = std::find(allowed.begin(), allowed.end(), kPythonPathVariable); found != allowed.end()) {
            fail(node.at / "env_allowlist" / static_cast<std::size_t>(found - allowed.begin()),
                 "a variable other than PYTHONPATH in a Python pack (the supervisor sets it; give yours in env, "
                 "which it joins after its own)",
                 describe_json_value(*found));
        }
        // The folder of comfy_supervisor, so that the pack's interpreter finds pack_worker.
        const std::string ours = python_package_dir();
        std::string& path = pack.env[kPythonPathVariable];
        path = path.empty() ? ours : ours + ":" + path;
    }

    // A command line that execve refuses (E2BIG) would be accepted here and then fail at
    // every start until the pack is marked failed; it is refused now, naming the pack.
    void check_exec_size(const Node& node, const PackConfig& process) const {
        const ExecLimits limits = exec_limits();
        std::size_t bytes = kSupervisorEnvBytes + (process.command.size() + 1);  // execve copies the file name too
        std::size_t strings = kSupervisorEnvCount;
        const auto add = [&](std::size_t length, const Pointer& at, const std::string& shown) {
            if (length + 1 > limits.string_bytes) {
                fail(at,
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
            fail(node.at,
                 "a command, args and environment that exec takes: at most " +
                     format_byte_size_exact(limits.total_bytes) + " all told (ARG_MAX), " +
                     format_byte_size_exact(kSupervisorEnvBytes) + " of it kept for the supervisor's variables",
                 std::to_string(bytes) + " bytes for " +
                     (node.at.to_string() == "/comfyui" ? std::string("the ComfyUI host")
                                                        : "pack \"" + process.name + "\""));
        }
    }

    std::string read_pack_name(const Node& node) const {
        std::string name = read_string(node, pack_name_rule());
        if (!is_pack_name(name)) fail(node.at, pack_name_rule(), describe_json_value(node.value));
        return name;
    }

    std::vector<std::string> read_args(const Node& node) const {
        if (!node.value.is_array()) fail(node.at, "a list of strings", describe_json_value(node.value));
        std::vector<std::string> args;
        for (std::size_t index = 0; index < node.value.size(); ++index) {
            args.push_back(read_string(Node{node.value[index], node.at / index}, "a string"));
        }
        return args;
    }

    std::vector<std::string> read_env_allowlist(const Node& node) const {
        if (!node.value.is_array()) fail(node.at, "a list of variable names", describe_json_value(node.value));
        std::vector<std::string> names;
        for (std::size_t index = 0; index < node.value.size(); ++index) {
            const Node entry{node.value[index], node.at / index};
            names.push_back(read_string(entry, "a variable name"));
            check_env_name(names.back(), entry.at);
        }
        return names;
    }

    std::map<std::string, std::string> read_env(const Node& node, const std::vector<std::string>& allowlist) const {
        if (!node.value.is_object()) {
            fail(node.at, "an object of variable names and string values", describe_json_value(node.value));
        }
        std::map<std::string, std::string> env;
        for (const auto& item : node.value.items()) {
            const Node entry{item.value(), node.at / item.key()};
            check_env_name(item.key(), entry.at);
            // Which of the two would win is a question the config should not raise.
            if (std::find(allowlist.begin(), allowlist.end(), item.key()) != allowlist.end()) {
                fail(entry.at, "a variable not also in env_allowlist", describe_json_value(item.key()));
            }
            env.emplace(item.key(), read_string(entry, "a string"));
        }
        return env;
    }

    void check_env_name(const std::string& name, const Pointer& at) const {
        if (!is_env_name(name)) fail(at, "a variable name of [A-Za-z_][A-Za-z0-9_]*", describe_json_value(name));
        if (name.starts_with(kReservedEnvPrefix)) {
            fail(at, "a variable name not starting with " + std::string(kReservedEnvPrefix) + " (reserved for the supervisor)",
                 describe_json_value(name));
        }
    }

    SandboxConfig read_sandbox(const Node& node, const std::string& working_directory) const {
        expect_object(node, {"writable", "readable", "network"});
        SandboxConfig sandbox;
        sandbox.writable.push_back(real_path(node, working_directory).string());
        if (const auto writable = member(node, "writable")) read_sandbox_paths(*writable, sandbox.writable);
        if (const auto readable = member(node, "readable")) read_sandbox_paths(*readable, sandbox.readable);
        if (const auto network = member(node, "network")) sandbox.network = read_flag(*network);
        return sandbox;
    }

    void read_sandbox_paths(const Node& node, std::vector<std::string>& paths) const {
        if (!node.value.is_array()) fail(node.at, "a list of paths", describe_json_value(node.value));
        for (std::size_t index = 0; index < node.value.size(); ++index) {
            const Node entry{node.value[index], node.at / index};
            paths.push_back(real_path(entry, read_path(entry, "the path of a file or folder")).string());
        }
    }

    // Links resolved: bwrap mounts a folder at the path it is given, and a link there
    // would be mounted over rather than followed.
    fs::path real_path(const Node& node, const fs::path& path) const {
        std::error_code error;
        fs::path real = fs::canonical(path, error);
        if (error) {
            fail(node.at, "an existing file or folder",
                 describe_json_value(node.value) + " (" + path.string() + ": " + error.message() + ")");
        }
        return real;
    }

    RestartPolicy read_restart(const Node& node) const {
        expect_object(node, {"initial_backoff_ms", "max_backoff_ms", "max_restarts", "window_ms"});
        RestartPolicy restart;
        if (const auto initial = member(node, "initial_backoff_ms")) restart.initial_backoff = read_ms(*initial, kBackoffMs);
        const auto max_backoff = member(node, "max_backoff_ms");
        if (max_backoff) restart.max_backoff = read_ms(*max_backoff, kBackoffMs);
        if (const auto restarts = member(node, "max_restarts")) {
            restart.max_restarts = static_cast<std::uint32_t>(read_unsigned(*restarts, kMaxRestarts));
        }
        if (const auto window = member(node, "window_ms")) restart.window = read_ms(*window, kRestartWindowMs);
        if (restart.max_backoff < restart.initial_backoff) {
            const std::string max_text = std::to_string(restart.max_backoff.count());
            fail(node.at / "max_backoff_ms",
                 "at least initial_backoff_ms (" + std::to_string(restart.initial_backoff.count()) + ")",
                 max_backoff ? describe_json_value(max_backoff->value) : max_text + " (the default)");
        }
        return restart;
    }

    std::string checkout_;  // /comfyui/checkout, absolute; empty when not given
};

}  // namespace

Config load_config(const std::string& path) {
    std::string text;
    try {
        text = read_input_file(path, kMaxJsonFileBytes);
    } catch (const InputFileError& error) {
        throw ConfigError(error.what());
    }
    return load_config_text(text, path);
}

Config load_config_text(std::string_view text, const std::string& path) {
    const json document = parse_document(text, path);
    return Loader(path).load(document, path);
}

std::uint32_t ledger_quota_of(const Config& config) {
    if (config.memory.ledger_quota) return *config.memory.ledger_quota;
    const std::size_t participants = config.packs.size() + (config.comfyui ? 1 : 0);
    const std::size_t share = config.limits.capacities.ledger_entries / std::max<std::size_t>(participants, 1);
    return static_cast<std::uint32_t>(std::max<std::size_t>(share, 1));
}

}  // namespace comfy::supervisor
