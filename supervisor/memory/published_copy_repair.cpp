#include "supervisor/memory/published_copy_repair.hpp"

namespace comfy::supervisor {

std::optional<std::string> repair_published_copy(ipc::SharedSegment& segment) {
    ipc::PublishedCopy& copy = *segment.published();
    const auto damage = copy.damage();
    if (!damage) return std::nullopt;
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
