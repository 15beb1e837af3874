#include "supervisor/lifecycle/sandbox.hpp"

#include "supervisor/config/sandbox_sight.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <string_view>

namespace comfy::supervisor {

namespace {

bool is_gpu_node(std::string_view name) {
    return name.starts_with("nvidia") || name == "dri" || name == "kfd";
}

void add(std::vector<std::string>& args, std::initializer_list<std::string_view> words) {
    args.insert(args.end(), words.begin(), words.end());
}

}  // namespace

std::vector<std::string> gpu_device_nodes(const std::string& dev) {
    std::vector<std::string> nodes;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(dev, error)) {
        if (is_gpu_node(entry.path().filename().string())) nodes.push_back(entry.path().string());
    }
    std::sort(nodes.begin(), nodes.end());  // the same arguments for the same machine
    return nodes;
}

SpawnRequest sandboxed_request(const SpawnRequest& request, const SandboxConfig& sandbox,
                               const std::vector<std::string>& devices) {
    std::vector<std::string> args;
    // bwrap, its pid 1 and the command each die by SIGKILL when their parent dies, so a
    // killed supervisor (or bwrap) takes the whole sandbox with it.
    add(args, {"--die-with-parent", "--unshare-all"});
    if (sandbox.network) add(args, {"--share-net"});
    // A session of its own: a worker writing to the supervisor's terminal cannot push
    // input into it (TIOCSTI). The supervisor's killpg still ends it: the signal ends
    // bwrap, and the sandbox dies with bwrap.
    add(args, {"--new-session"});
    // bwrap keeps every capability when started by root; a pack gets none.
    add(args, {"--cap-drop", "ALL"});
    add(args, {"--ro-bind", "/", "/"});
    // A /dev of its own (null, zero, random, tty, ...) plus the GPU, not the host's disks.
    add(args, {"--dev", "/dev"});
    for (const auto& device : devices) add(args, {"--dev-bind", device, device});
    // Its own pid namespace's /proc: no other process is there to read or signal.
    add(args, {"--proc", "/proc"});
    // Empty, private /dev/shm, /tmp and /run: the supervisor's segment and the other
    // workers' files are not there by name, nor the sockets of /run (a Docker or D-Bus
    // socket accepts a connect on a read-only mount).
    add(args, {"--tmpfs", "/dev/shm", "--tmpfs", "/tmp", "--tmpfs", "/run"});
    // The pack's own program stays reachable wherever it lies, under /tmp included.
    add(args, {"--ro-bind", request.command, request.command});
    for (const auto& path : sandbox.readable) add(args, {"--ro-bind", path, path});
    // Last, so that a writable folder under a readable one stays writable.
    for (const auto& path : sandbox.writable) add(args, {"--bind", path, path});
    add(args, {"--chdir", request.working_directory, "--", request.command});
    args.insert(args.end(), request.args.begin(), request.args.end());
    // The rest (environment, working directory, descriptors) carries over as it is.
    SpawnRequest sandboxed = request;
    sandboxed.command = kBwrapPath;
    sandboxed.args = std::move(args);
    return sandboxed;
}

SpawnRequest with_sandbox(const PackConfig& pack, SpawnRequest request) {
    if (!pack.sandbox) return request;
    if (!pack.python || pack.python->environment.empty()) {
        return sandboxed_request(request, *pack.sandbox, gpu_device_nodes());
    }
    // An environment's venv and the Python it was made from, as they are now: at load it may
    // have been missing, or since rebuilt from another Python (the load refused an
    // environment no sandbox can show).
    SandboxConfig sandbox = *pack.sandbox;
    for (const auto& path : hidden_interpreter_paths(pack.python->interpreter)) {
        if (std::find(sandbox.readable.begin(), sandbox.readable.end(), path.string()) == sandbox.readable.end()) {
            sandbox.readable.push_back(path.string());
        }
    }
    return sandboxed_request(request, sandbox, gpu_device_nodes());
}

namespace {

// The pid a process has in its own (innermost) pid namespace; nothing when it is gone.
std::optional<pid_t> innermost_pid(pid_t pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("NSpid:", 0) != 0) continue;
        std::istringstream figures(line.substr(6));
        pid_t last = 0;
        for (pid_t figure = 0; figures >> figure;) last = figure;
        if (last > 0) return last;
    }
    return std::nullopt;
}

// The children of `pid`, from every thread's children list.
std::vector<pid_t> children_of(pid_t pid) {
    std::vector<pid_t> children;
    std::error_code ignored;
    const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
    for (const auto& task : std::filesystem::directory_iterator(tasks, ignored)) {
        std::ifstream list(task.path() / "children");
        for (pid_t child = 0; list >> child;) children.push_back(child);
    }
    return children;
}

}  // namespace

bool is_inner_pid_of(pid_t outer, pid_t claimed) {
    // A sandbox holds bwrap's pid 1 and the command under it: a few processes, not a tree
    // worth bounding further than by depth.
    std::vector<pid_t> frontier = children_of(outer);
    for (int depth = 0; depth < 4 && !frontier.empty(); ++depth) {
        std::vector<pid_t> next;
        for (const pid_t pid : frontier) {
            if (innermost_pid(pid) == claimed) return true;
            for (const pid_t child : children_of(pid)) next.push_back(child);
        }
        frontier = std::move(next);
    }
    return false;
}

}  // namespace comfy::supervisor
