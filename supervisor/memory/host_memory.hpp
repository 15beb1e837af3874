#pragma once
// Host RAM as the supervisor budgets it (upstream leaves this out): what is available to
// this supervisor and its workers, cgroup-aware, and the pure rules for admitting pins
// and for spreading a pin release over the workers that hold pins.

#include "shared/memory_arithmetic.hpp"

#include <optional>
#include <vector>

namespace comfy::supervisor {

struct HostMemoryReading {
    Bytes available = 0;
};

// The smaller of the cgroup v2 headroom (memory.max - memory.current of our cgroup, when
// a limit is set) and /proc/meminfo's MemAvailable. Nothing when neither can be read.
std::optional<HostMemoryReading> read_host_memory();

// How much of a pin request to grant: what keeps `available` above `low_water`.
Bytes pin_grant(Bytes asked, Bytes available, Bytes low_water);

// What one live participant holds in host RAM, from its census.
// Host RAM as an operator sees it (the metrics): the configured budget and low water,
// every participant's pins from the censuses, and what is available.
struct HostFigures {
    Bytes budget = 0;     // host.budget_bytes; 0 when the machine is read instead
    Bytes low_water = 0;  // host.low_water_bytes
    std::optional<Bytes> available;  // nothing when host memory could not be read
    Bytes pinned = 0;
};

struct HostHolding {
    std::uint32_t slot;
    std::uint32_t generation;
    Bytes pinned;
    Bytes resident = 0;  // its resident set
};

// A configured budget less what the participants hold: each one's resident set, or its
// pins where those are larger (pinned pages are part of the resident set once touched,
// and a pin the resident set does not show yet still holds its share of the budget).
Bytes budget_left(Bytes budget, const std::vector<HostHolding>& holdings);

struct PinRelease {
    HostHolding holder;
    Bytes bytes;
};

// Spreads `deficit` over the holders in proportion to what each has pinned, skipping
// holders under `floor` (too small to be worth a message). Each share is rounded up so
// the shares cover the deficit, and never exceeds what the holder has pinned.
std::vector<PinRelease> plan_pin_releases(const std::vector<HostHolding>& holders, Bytes deficit,
                                          Bytes floor = 256 * kMiB);

}  // namespace comfy::supervisor
