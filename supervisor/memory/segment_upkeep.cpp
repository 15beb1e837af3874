#include "supervisor/memory/segment_upkeep.hpp"

#include "ipc/published_copy.hpp"
#include "shared/segment_layout.hpp"
#include "supervisor/ops/log/log.hpp"

namespace comfy::supervisor {

ipc::SharedSegment create_fresh_segment(const std::string& instance, const Config& config) {
    const std::string name = ipc::segment_name(instance);
    const auto found = ipc::inspect_segment(name);
    if (found.state == ipc::SegmentState::stale) log_line("removing stale segment " + name + ": " + found.detail);
    return create_segment(instance, config.limits.capacities,
                          config.device.kind == DeviceKind::simulated ? config.device.total_bytes : 0);
}

std::optional<std::string> republish_if_damaged(ipc::SharedSegment& segment) {
    ipc::PublishedCopy& copy = *segment.published();
    const auto damage = copy.damage();
    if (!damage) return std::nullopt;
    // Another process of this user did it; the supervisor and its workers go on with the
    // sealed segment, and only readers by name (comfyctl) see the copy.
    std::string line = "segment " + segment.name() + ": its published copy (what comfyctl reads) " + *damage +
                       ", by another process of this user";
    try {
        copy.republish(segment.base());
        line += "; published it again";
    } catch (const ipc::SegmentError& e) {
        line += std::string("; cannot publish it again: ") + e.what();
    }
    return line;
}

}  // namespace comfy::supervisor
