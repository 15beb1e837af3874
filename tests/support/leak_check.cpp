#include "tests/support/leak_check.hpp"

#include "ipc/process_identity.hpp"
#include "tests/support/test_instance.hpp"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace comfy::test {

namespace {

struct Child {
    pid_t pid;
    std::string comm;
};

std::vector<Child> children_of(pid_t parent) {
    std::vector<Child> found;
    DIR* proc = ::opendir("/proc");
    if (proc == nullptr) return found;
    while (const dirent* entry = ::readdir(proc)) {
        const pid_t pid = static_cast<pid_t>(std::strtol(entry->d_name, nullptr, 10));
        if (pid <= 0) continue;
        // A process that exits meanwhile reads as nothing, never as an exception.
        const auto read = ipc::read_proc_stat(pid);
        if (!read) continue;
        const std::string& stat = *read;
        const auto open = stat.find('(');
        const auto close = stat.rfind(')');
        if (open == std::string::npos || close == std::string::npos || close + 4 >= stat.size()) continue;
        // After ") " come the state and then the parent pid.
        const pid_t ppid = static_cast<pid_t>(std::strtol(stat.c_str() + close + 4, nullptr, 10));
        if (ppid == parent) found.push_back({pid, stat.substr(open + 1, close - open - 1)});
    }
    ::closedir(proc);
    return found;
}

std::vector<std::string> segment_files() {
    std::vector<std::string> found;
    const std::string prefix = test_segment_prefix();
    DIR* dir = ::opendir("/dev/shm");
    if (dir == nullptr) return found;
    while (const dirent* entry = ::readdir(dir)) {
        const std::string file = entry->d_name;
        if (file.rfind(prefix, 0) == 0) found.push_back(file);
    }
    ::closedir(dir);
    return found;
}

}  // namespace

void remove_stale_segments() {
    for (const auto& file : segment_files()) {
        std::fprintf(stderr, "leak check: /dev/shm/%s was left by an earlier process with this pid; removed\n",
                     file.c_str());
        ::shm_unlink(("/" + file).c_str());
    }
}

std::vector<std::string> collect_and_clean_leaks() {
    std::vector<std::string> leaks;
    for (const auto& child : children_of(::getpid())) {
        leaks.push_back("child process " + std::to_string(child.pid) + " (" + child.comm + ") left running or unreaped");
        ::kill(child.pid, SIGKILL);
        ::waitpid(child.pid, nullptr, 0);
    }
    for (const auto& file : segment_files()) {
        leaks.push_back("shared-memory segment /dev/shm/" + file + " left behind");
        ::shm_unlink(("/" + file).c_str());
    }
    return leaks;
}

}  // namespace comfy::test
