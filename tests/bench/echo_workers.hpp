#pragma once
// An echo to one worker with idle workers beside it (scripts/bench lifecycle): what the
// supervisor pays per message, and whether that grows with the number of workers. The real
// Supervisor loop starts `workers` comfy-worker processes (a one-node pack whose node does
// nothing, simulated device); two seconds after all are ready it sends one of them, w1, a
// node to run, again and again, each as soon as the last one's result came back, while
// the others sit idle. Per echo the supervisor sends the work request and reads
// node_started, node_finished and the result.

#include <cstdint>
#include <filesystem>

namespace comfy::bench {

struct EchoFigures {
    double rtt_p50_us;  // submit() to the result's handler, wall clock
    double rtt_p99_us;
    // The loop thread's CPU per echo over the timed echoes of one prompt (heartbeat ticks
    // included, as they fall).
    double cpu_per_echo_us;
    // The same when every echo starts a new prompt (a new epoch): each sends a
    // cast_epoch_boundary to the workers it concerns.
    double cpu_per_new_prompt_echo_us;
};

// Measured in a child forked for it; throws when a worker fails or restarts, or an echo fails.
EchoFigures echo_with_idle_workers(const std::filesystem::path& worker, std::uint32_t workers);

}  // namespace comfy::bench
