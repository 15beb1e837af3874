#include "tests/soak/process_probe.hpp"

#include "ipc/process_identity.hpp"
#include "ipc/shm_segment.hpp"

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

namespace comfy::soak {

namespace {

std::string read_whole(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The NUL-separated strings of /proc/PID/environ or cmdline.
std::vector<std::string> proc_strings(pid_t pid, const char* file) {
    const std::string text = read_whole("/proc/" + std::to_string(pid) + "/" + file);
    std::vector<std::string> strings;
    std::size_t start = 0;
    for (std::size_t end; (end = text.find('\0', start)) != std::string::npos; start = end + 1) {
        strings.push_back(text.substr(start, end - start));
    }
    return strings;
}

// State (one letter) and command name from /proc/PID/stat.
std::optional<std::pair<char, std::string>> state_and_name(pid_t pid) {
    const auto stat = ipc::read_proc_stat(pid);
    if (!stat) return std::nullopt;
    const auto open = stat->find('(');
    const auto close = stat->rfind(')');
    if (open == std::string::npos || close == std::string::npos || close + 2 >= stat->size()) return std::nullopt;
    return std::make_pair((*stat)[close + 2], stat->substr(open + 1, close - open - 1));
}

bool of_instance(pid_t pid, const std::string& instance) {
    for (const auto& variable : proc_strings(pid, "environ")) {
        if (variable == "COMFY_SV_INSTANCE=" + instance) return true;
    }
    const auto args = proc_strings(pid, "cmdline");
    for (std::size_t i = 0; i + 1 < args.size(); ++i) {
        if (args[i] == "--instance" && args[i + 1] == instance) return true;
    }
    return false;
}

}  // namespace

std::optional<std::uint64_t> resident_kib(pid_t pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(status, line);) {
        if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
    }
    return std::nullopt;
}

std::optional<std::size_t> open_descriptors(pid_t pid) {
    std::error_code error;
    std::filesystem::directory_iterator fds("/proc/" + std::to_string(pid) + "/fd", error);
    if (error) return std::nullopt;
    return static_cast<std::size_t>(std::distance(fds, std::filesystem::directory_iterator{}));
}

std::optional<pid_t> parent_of(pid_t pid) {
    const auto stat = ipc::read_proc_stat(pid);
    if (!stat) return std::nullopt;
    const auto close = stat->rfind(')');
    if (close == std::string::npos || close + 4 >= stat->size()) return std::nullopt;
    return static_cast<pid_t>(std::stol(stat->substr(close + 4)));
}

std::vector<InstanceProcess> instance_processes(const std::string& instance) {
    std::vector<InstanceProcess> found;
    DIR* proc = ::opendir("/proc");
    if (proc == nullptr) return found;
    while (const dirent* entry = ::readdir(proc)) {
        const pid_t pid = static_cast<pid_t>(std::strtol(entry->d_name, nullptr, 10));
        if (pid <= 0 || pid == ::getpid()) continue;
        const auto stat = state_and_name(pid);
        if (!stat || stat->first == 'Z' || stat->first == 'X') continue;  // gone, or dead and unreaped
        if (of_instance(pid, instance)) found.push_back({pid, stat->second});
    }
    ::closedir(proc);
    return found;
}

bool is_live(pid_t pid) {
    const auto stat = state_and_name(pid);
    return stat && stat->first != 'Z' && stat->first != 'X';
}

void reap_exited_children() {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
}

std::vector<std::string> shm_entries(const std::string& instance) {
    // The segment's name is "/NAME"; /dev/shm holds it as NAME.
    const std::string name = ipc::segment_name(instance).substr(1);
    std::vector<std::string> found;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
        if (entry.path().filename() == name) found.push_back(entry.path().string());
    }
    return found;
}

}  // namespace comfy::soak
