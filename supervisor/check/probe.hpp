#pragma once
// A program run to its end for `check`: spawned as the supervisor spawns a participant
// (lifecycle/process_spawner.hpp: its own process group, death with us, the subreaper of
// its tree), its output kept, bounded in time, and nothing it started left behind.

#include "supervisor/config/config.hpp"
#include "supervisor/lifecycle/process_spawner.hpp"
#include "supervisor/lifecycle/strays.hpp"

#include <string>

namespace comfy::supervisor {

struct ProbeResult {
    std::string failure;  // why it could not be started or did not end in time; empty when it ended
    bool timed_out = false;  // it did not end within its limit, and was killed
    int status = -1;      // its exit status, when it exited
    int signal = 0;       // the signal that ended it, when one did
    std::string output;   // stdout and stderr together, the tail past kProbeOutputBytes
    bool succeeded() const { return failure.empty() && signal == 0 && status == 0; }
};

// The most output a probe keeps: a pack's description of hundreds of nodes fits.
inline constexpr std::size_t kProbeOutputBytes = std::size_t{64} << 20;

class Prober {
public:
    // Makes this process the subreaper of what its probes start (Strays), so that a
    // process one of them leaves behind comes here and is ended.
    Prober() = default;
    Prober(const Prober&) = delete;
    Prober& operator=(const Prober&) = delete;

    // Runs `request` (its output_fd is set here) until it exits or `limit` passes (then it
    // is killed), then kills and reaps whatever it left: returns once nothing of it lives.
    ProbeResult run(SpawnRequest request, Milliseconds limit);

private:
    // Kills the process group `group` and every child of this process, and reaps them.
    void end_leftovers(pid_t group);

    Strays strays_;
};

// The last line of `output` that is not empty, or empty.
std::string last_line(const std::string& output);

}  // namespace comfy::supervisor
