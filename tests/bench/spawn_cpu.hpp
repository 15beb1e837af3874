#pragma once
// The supervisor's own CPU per spawned worker: the loop's thread CPU time from run() until
// every worker has said Hello, divided by the worker count (scripts/bench arbitration,
// spawn_cpu_ratio_1023_vs_32). The workers are comfy-worker processes on the simulated
// device, each with a one-node pack; their own CPU is not counted (they are other processes).

#include <cstdint>
#include <filesystem>

namespace comfy::bench {

// Microseconds of supervisor CPU per worker, starting `workers` at once. Throws when a
// worker fails or restarts (the figure would then count more than one spawn each).
double supervisor_cpu_per_spawn_us(const std::filesystem::path& worker, std::uint32_t workers);

}  // namespace comfy::bench
