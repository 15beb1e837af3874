#pragma once
// Identifies a process across pid reuse: a pid plus the kernel's start time for it.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace comfy::ipc {

// The text of /proc/PID/stat (its first 1024 bytes, which hold every field up to the
// start time), or nothing when the process does not exist or has exited meanwhile.
std::optional<std::string> read_proc_stat(pid_t pid);

// The process's start time in clock ticks since boot (field 22 of /proc/PID/stat),
// or nothing when the process does not exist (or its stat cannot be parsed).
std::optional<std::uint64_t> process_start_time(pid_t pid);

// The pid of the process's parent (field 4 of /proc/PID/stat), or nothing when the
// process does not exist (or its stat cannot be parsed); parent_in_stat reads it from a
// stat's text already read.
std::optional<pid_t> parent_pid(pid_t pid);
std::optional<pid_t> parent_in_stat(const std::string& stat);

// True when `pid` exists and is the same process that had `start_time`.
bool process_is_alive(pid_t pid, std::uint64_t start_time);

}  // namespace comfy::ipc
