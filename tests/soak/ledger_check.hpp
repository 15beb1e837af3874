#pragma once
// The ledger against its owners' own figures. A participant's census reports the device
// bytes it uses; for the reference worker and the ComfyUI stand-in that is the loaded
// bytes of its models plus its cast buffers (the deaf pack has no cast buffers), so the
// ledger's loaded bytes of a participant's models must equal its census's device bytes
// less its cast buffers. Every ledger row must also belong to the current life of a
// participant that is up: a dead life's rows go with it.

#include "supervisor/ctl/segment_report.hpp"

#include <optional>
#include <string>
#include <vector>

namespace comfy::soak {

// What disagrees in one reading of the segment, one line each; empty when all agree.
// Participants that are not up, or whose census is not current, have nothing to compare.
std::vector<std::string> ledger_disagreements(const ctl::SegmentReport& report);

// The segment of `instance` read now; nothing when it cannot be attached (no live
// supervisor has it).
std::optional<ctl::SegmentReport> read_instance(const std::string& instance);

}  // namespace comfy::soak
