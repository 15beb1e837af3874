#include "supervisor/lifecycle/strays.hpp"

#include "ipc/process_identity.hpp"

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <system_error>

namespace comfy::supervisor {

namespace {

struct Child {
    pid_t pid;
    std::string command;
    bool dead;  // exited already, not reaped yet
};

// This process's children, from every /proc/PID/stat: the kernel's per-task "children"
// lists need CONFIG_PROC_CHILDREN, which not every kernel has. A sweep is rare (a life's
// end, a stray's death), so reading the table then costs little.
std::vector<Child> children() {
    std::vector<Child> found;
    const pid_t self = ::getpid();
    DIR* proc = ::opendir("/proc");
    if (proc == nullptr) return found;
    while (const dirent* entry = ::readdir(proc)) {
        const pid_t pid = static_cast<pid_t>(std::strtol(entry->d_name, nullptr, 10));
        if (pid <= 0) continue;
        const auto stat = ipc::read_proc_stat(pid);  // nothing when it exited meanwhile
        if (!stat) continue;
        if (ipc::parent_in_stat(*stat) != self) continue;
        // The command (field 2) is in parentheses and may hold anything; after the last
        // ") " comes the state.
        const auto open = stat->find('(');
        const auto close = stat->rfind(')');
        if (open == std::string::npos || close == std::string::npos || close + 2 >= stat->size()) continue;
        found.push_back({pid, stat->substr(open + 1, close - open - 1), (*stat)[close + 2] == 'Z'});
    }
    ::closedir(proc);
    return found;
}

}  // namespace

Strays::Strays() {
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
        throw std::system_error(errno, std::generic_category(), "prctl(PR_SET_CHILD_SUBREAPER)");
    }
}

std::vector<Strays::Stray> Strays::sweep(const std::function<bool(pid_t)>& participant) {
    std::vector<Stray> ended;
    std::set<pid_t> unreaped;
    for (const auto& child : children()) {
        if (participant(child.pid)) continue;
        // Again at every sweep: harmless to one dying already, and a pid reused by a new
        // stray is not taken for the one signalled before.
        ::kill(child.pid, SIGKILL);
        // One that had exited by itself (bwrap's first process, just after bwrap) is only reaped.
        if (!child.dead && !killed_.contains(child.pid)) {
            ended.push_back({child.pid, child.command});
        }
        // Only this pid: a participant's exit is its pidfd handler's to reap, with its status.
        if (::waitpid(child.pid, nullptr, WNOHANG) != child.pid) unreaped.insert(child.pid);
    }
    killed_ = std::move(unreaped);
    return ended;
}

std::string Strays::describe(std::vector<Stray> ended, const std::string& whose, bool sandboxes) {
    if (sandboxes) std::erase_if(ended, [](const Stray& stray) { return stray.command == "bwrap"; });
    if (ended.empty()) return {};
    constexpr std::size_t kNamed = 8;  // a fork bomb's thousands are counted, not listed
    std::string named;
    for (std::size_t i = 0; i < std::min(kNamed, ended.size()); ++i) {
        named += (i ? ", " : "") + std::to_string(ended[i].pid) + " (" + ended[i].command + ")";
    }
    if (ended.size() > kNamed) named += " and " + std::to_string(ended.size() - kNamed) + " more";
    return "ended " + std::to_string(ended.size()) + " process(es) " + whose + ": " + named;
}

}  // namespace comfy::supervisor
