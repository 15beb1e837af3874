#pragma once
// The segment's life as the supervisor sees it: made fresh at start (a stale one of a dead
// supervisor removed first), and its published copy kept whole against other processes of
// this user, who can reach it by name.

#include "ipc/shm_segment.hpp"
#include "supervisor/config/config.hpp"

#include <optional>
#include <string>

namespace comfy::supervisor {

// The instance's new segment, sized by the config's capacities (and, for the simulated
// device, its memory). A segment left by a dead supervisor is removed, with a log line;
// a live one's makes this throw.
ipc::SharedSegment create_fresh_segment(const std::string& instance, const Config& config);

// When another process damaged the published copy (what comfyctl reads), publishes it
// again and returns the line to log: what was found and whether the copy is whole again.
std::optional<std::string> republish_if_damaged(ipc::SharedSegment& segment);

}  // namespace comfy::supervisor
