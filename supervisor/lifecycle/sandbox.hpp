#pragma once
// The optional per-pack sandbox: a worker started inside bubblewrap (bwrap, Debian's
// package bubblewrap) instead of directly. What it keeps out and why: docs/SECURITY.md.

#include "supervisor/config/config.hpp"
#include "supervisor/lifecycle/process_spawner.hpp"

#include <sys/types.h>

#include <string>
#include <vector>

namespace comfy::supervisor {

// Debian's bwrap; like a pack's command, never looked up in PATH.
inline constexpr const char* kBwrapPath = "/usr/bin/bwrap";

// The GPU device nodes under `dev` now: NVIDIA's (nvidia0, nvidiactl, nvidia-uvm, the
// nvidia-caps folder, ...), the DRM folder dri, and AMD's compute node kfd.
std::vector<std::string> gpu_device_nodes(const std::string& dev = "/dev");

// `request` run by `bwrap` inside the sandbox `sandbox` describes, with `devices` bound.
// The environment, working directory and inherited descriptor carry over unchanged:
// bwrap hands the command its own environment and every descriptor not marked
// close-on-exec, at the same numbers.
SpawnRequest sandboxed_request(const SpawnRequest& request, const SandboxConfig& sandbox,
                               const std::vector<std::string>& devices);

// Whether `claimed`, a pid as a process inside a sandbox sees itself (its Hello's), is a
// descendant of `outer`, the bwrap the supervisor spawned, in that process's own pid
// namespace: the last figure of NSpid in /proc/PID/status. Outside a sandbox the Hello's
// pid is compared with the spawned pid directly.
bool is_inner_pid_of(pid_t outer, pid_t claimed);

// What the supervisor spawns for `pack`: `request` itself, or, when the pack asks for the
// sandbox, `request` inside it with the GPU device nodes present now and, for a pack's
// environment, the parts of it the sandbox hides as they are now (config/sandbox_sight.hpp).
SpawnRequest with_sandbox(const PackConfig& pack, SpawnRequest request);

}  // namespace comfy::supervisor
