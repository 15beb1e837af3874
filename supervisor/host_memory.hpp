#pragma once
// Host RAM as the supervisor budgets it (upstream leaves this out): what is available to
// this supervisor and its workers, cgroup-aware, and the pure rules for admitting pins
// and for spreading a pin release over the workers that hold pins.

#include "shared/memory_arithmetic.hpp"

#include <optional>
#include <string>
#include <vector>

namespace comfy::supervisor {

struct HostMemoryReading {
    Bytes available = 0;
    std::string source;  // "cgroup memory.max", "MemAvailable": for log lines
};

// The smaller of the cgroup v2 headroom (memory.max - memory.current of our cgroup, when
// a limit is set) and /proc/meminfo's MemAvailable. Nothing when neither can be read.
std::optional<HostMemoryReading> read_host_memory();

// How much of a pin request to grant: what keeps `available` above `low_water`.
Bytes pin_grant(Bytes asked, Bytes available, Bytes low_water);

struct PinHolder {
    std::uint32_t slot;
    std::uint32_t generation;
    Bytes pinned;
};

struct PinRelease {
    PinHolder holder;
    Bytes bytes;
};

// Spreads `deficit` over the holders in proportion to what each has pinned, skipping
// holders under `floor` (too small to be worth a message). Each share is rounded up so
// the shares cover the deficit, and never exceeds what the holder has pinned.
std::vector<PinRelease> plan_pin_releases(const std::vector<PinHolder>& holders, Bytes deficit,
                                          Bytes floor = 256 * kMiB);

}  // namespace comfy::supervisor
