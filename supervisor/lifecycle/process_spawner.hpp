#pragma once
// Starts a worker process: its own process group, a minimal environment, exactly the
// descriptors it is meant to have, death with its parent (PR_SET_PDEATHSIG), the subreaper
// of what it starts (PR_SET_CHILD_SUBREAPER, strays.hpp), and a pidfd so the event loop
// sees its exit at once.
//
// clone+exec by hand rather than Boost.Process: we need PR_SET_PDEATHSIG and setpgid in
// the child before exec, chosen inherited descriptors, a pidfd for our own Asio loop, and
// the exec error reported back; Boost.Process v2's async_wait can fall into a blocking
// waitpid (boostorg/process#564).

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace comfy::supervisor {

struct SpawnRequest {
    std::string command;  // absolute path
    std::vector<std::string> args;
    std::map<std::string, std::string> environment;  // the child's whole environment
    std::string working_directory;
    // Stay open across exec, at the same numbers; every other descriptor above stderr is
    // closed in the child, whether or not the supervisor marked it close-on-exec.
    std::vector<int> inherited_fds;
    // Becomes the child's stdout and stderr; -1 leaves it the supervisor's.
    int output_fd = -1;
};

struct SpawnedProcess {
    pid_t pid = -1;
    int pidfd = -1;            // readable when the process exits
    int exec_error_fd = -1;    // holds a StartFailure if the child failed before its command ran; EOF otherwise
};

// Where a child failed between the clone and its command, and the errno: its set-up (its
// process group, descriptors, signals), its working directory, or the exec of the command.
struct StartFailure {
    enum class Step : int { none = 0, setup, working_directory, exec };
    Step step = Step::none;
    int error = 0;
};

// Clones (sharing memory until exec, as vfork) and execs. Throws std::system_error when
// the clone or pidfd_open fails.
SpawnedProcess spawn_process(const SpawnRequest& request);

// After the process exited: where and why it failed before its command ran, or Step::none
// when the command ran. Closes exec_error_fd.
StartFailure take_start_failure(SpawnedProcess& process);

}  // namespace comfy::supervisor
