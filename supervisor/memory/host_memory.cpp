#include "supervisor/memory/host_memory.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

namespace comfy::supervisor {

namespace {

std::optional<Bytes> read_number(const std::string& path) {
    std::ifstream in(path);
    std::string text;
    if (!(in >> text) || text == "max") return std::nullopt;
    try {
        return static_cast<Bytes>(std::stoull(text));
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

// The cgroup v2 folder of this process, from the "0::/path" line of /proc/self/cgroup.
std::optional<std::string> own_cgroup() {
    std::ifstream in("/proc/self/cgroup");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("0::", 0) == 0) return "/sys/fs/cgroup" + line.substr(3);
    }
    return std::nullopt;
}

std::optional<Bytes> mem_available() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    Bytes kib = 0;
    std::string unit;
    while (in >> key >> kib >> unit) {
        if (key == "MemAvailable:") return kib * 1024;
    }
    return std::nullopt;
}

}  // namespace

std::optional<HostMemoryReading> read_host_memory() {
    std::optional<HostMemoryReading> reading;
    if (const auto available = mem_available()) reading = HostMemoryReading{*available};
    if (const auto cgroup = own_cgroup()) {
        const auto limit = read_number(*cgroup + "/memory.max");
        const auto current = read_number(*cgroup + "/memory.current");
        if (limit && current) {
            const Bytes headroom = *limit > *current ? *limit - *current : 0;
            if (!reading || headroom < reading->available) reading = HostMemoryReading{headroom};
        }
    }
    return reading;
}

Bytes budget_left(Bytes budget, const std::vector<HostHolding>& holdings) {
    Bytes held = 0;
    for (const auto& h : holdings) held += std::max(h.pinned, h.resident);
    return budget > held ? budget - held : 0;
}

Bytes pin_grant(Bytes asked, Bytes available, Bytes low_water) {
    return available > low_water ? std::min(asked, available - low_water) : 0;
}

std::vector<PinRelease> plan_pin_releases(const std::vector<HostHolding>& holders, Bytes deficit, Bytes floor) {
    std::vector<PinRelease> plan;
    Bytes eligible = 0;
    for (const auto& h : holders) {
        if (h.pinned >= floor) eligible += h.pinned;
    }
    if (eligible == 0 || deficit == 0) return plan;
    for (const auto& h : holders) {
        if (h.pinned < floor) continue;
        // deficit * pinned / eligible, rounded up, in 128 bits: both factors reach 2^50.
        __extension__ using Wide = unsigned __int128;
        const auto share = static_cast<Bytes>((static_cast<Wide>(deficit) * h.pinned + eligible - 1) / eligible);
        plan.push_back({h, std::min(share, h.pinned)});
    }
    return plan;
}

}  // namespace comfy::supervisor
