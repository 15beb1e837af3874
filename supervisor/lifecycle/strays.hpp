#pragma once
// What a participant starts never outlives it (docs/SECURITY.md, "What a pack's processes
// can outlive"). The supervisor is the child subreaper of everything below it, and each
// participant is the subreaper of its own tree (process_spawner.cpp): a process that
// leaves its parent, by a double fork or after setsid(), stays below its participant for
// as long as that one lives, and comes to the supervisor when it ends. So a child of the
// supervisor that is not a participant's own process (a stray) is what a life that ended
// left behind, or what fled a participant that cleared its own subreaper flag; either
// way it is ended at once. Its own children come to the supervisor when it dies, and
// are ended at the next sweep (SIGCHLD), until none is left.

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace comfy::supervisor {

class Strays {
public:
    // Makes this process the child subreaper of its descendants (PR_SET_CHILD_SUBREAPER).
    // Throws std::system_error when the kernel refuses.
    Strays();

    struct Stray {
        pid_t pid;
        std::string command;  // as /proc/PID/stat names it
    };
    // Sends SIGKILL to every child of this process for which `participant` is false, and
    // reaps those that have died. Never waits: a stray stuck in the kernel is reaped at a
    // later sweep. Returns each live stray it signalled for the first time.
    std::vector<Stray> sweep(const std::function<bool(pid_t)>& participant);

    // Strays the last sweep signalled that have not been reaped yet.
    std::size_t unreaped() const noexcept { return killed_.size(); }

private:
    std::set<pid_t> killed_;  // signalled at an earlier sweep, not reaped yet
};

}  // namespace comfy::supervisor
