#pragma once
// What /proc and /dev/shm say about the supervisor and what it spawned.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace comfy::soak {

// VmRSS of /proc/PID/status, in KiB; nothing once the process is gone.
std::optional<std::uint64_t> resident_kib(pid_t pid);
// Entries of /proc/PID/fd; nothing once the process is gone.
std::optional<std::size_t> open_descriptors(pid_t pid);
// The parent of `pid` (from /proc/PID/stat); nothing once it is gone.
std::optional<pid_t> parent_of(pid_t pid);

// A live process (zombies left out) of `instance`, this one excepted: a participant (its
// environment has COMFY_SV_INSTANCE=instance) or a supervisor ("--instance instance" on
// its command line).
struct InstanceProcess {
    pid_t pid;
    std::string command;
    std::string describe() const { return std::to_string(pid) + " (" + command + ")"; }
};
std::vector<InstanceProcess> instance_processes(const std::string& instance);

// Whether `pid` is a live process (a zombie is not).
bool is_live(pid_t pid);

// Reaps every child that has exited. The soak is the subreaper of the supervisor's
// orphans; call it only while no supervisor of its own runs, which it would reap too.
void reap_exited_children();

// The /dev/shm entries of `instance`'s segment.
std::vector<std::string> shm_entries(const std::string& instance);

}  // namespace comfy::soak
