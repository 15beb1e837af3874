#pragma once
// The segment's published copy (what comfyctl reads by name) kept whole: another process of
// this user can truncate it or take its name; the supervisor and its workers go on with the
// sealed segment, and only readers by name see the copy, so it is published again.

#include "ipc/shm_segment.hpp"

#include <optional>
#include <string>

namespace comfy::supervisor {

// Publishes `segment`'s copy again when it was damaged; the line that says what happened
// (for the log), or nothing when the copy was whole.
std::optional<std::string> repair_published_copy(ipc::SharedSegment& segment);

}  // namespace comfy::supervisor
