#pragma once
// Which fault comes next, when, and on whom: all drawn from one generator seeded from the
// seed the soak prints first, so that a seed names a run (what the processes happen to be
// doing when a fault lands is the machine's; the faults are the seed's).

#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

namespace comfy::soak {

enum class FaultKind {
    kill_worker,         // SIGKILL of a participant, whatever it is doing
    kill_mid_eviction,   // SIGKILL of an owner just asked to free memory
    kill_mid_admission,  // SIGKILL of the participant whose admission asked it
    stop_short,          // SIGSTOP for less than the heartbeat time-out, then SIGCONT
    stop_long,           // SIGSTOP for more: the supervisor must stop and replace it
    hostile,             // a hostile pack signalled to do its misdeed
    hostile_call,        // the host signalled to call a hostile Python pack's node (Cancel, a broken protocol)
    kill_supervisor,     // SIGKILL of the supervisor; a new one on the same instance
};
const char* fault_name(FaultKind kind) noexcept;

class FaultPlan {
public:
    FaultPlan(std::uint64_t seed, std::chrono::seconds length);

    // The next fault once `elapsed` has passed: a supervisor kill when one is due, else the
    // next of a shuffled deck of the other kinds (every kind comes once per deck).
    FaultKind next(std::chrono::steady_clock::duration elapsed);
    // The pause before the next fault.
    std::chrono::milliseconds pause();
    // How long a stop lasts.
    std::chrono::milliseconds stop_length(FaultKind kind, std::chrono::milliseconds heartbeat_timeout);
    // One of `count` choices (a target).
    std::size_t pick(std::size_t count);

private:
    std::mt19937_64 random_;
    std::vector<FaultKind> deck_;
    std::vector<std::chrono::milliseconds> supervisor_kills_;  // when, from the start; soonest last
};

}  // namespace comfy::soak
