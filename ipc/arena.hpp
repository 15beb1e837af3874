#pragma once
// A value arena: one life's memory for the values it hands its peers (the outputs of the
// nodes it runs). A sealed memfd that only its producer writes: the producer inherits it
// writable, and each peer gets a read-only descriptor and maps it privately, so no peer
// can write the producer's bytes. It is sparse: memory is used only where the producer
// writes, and the kernel frees it when the last descriptor and mapping go, so a dead
// life's arena lives exactly as long as a peer still reads from it.

#include "ipc/unique_fd.hpp"

#include <cstdint>
#include <string>

namespace comfy::ipc {

struct Arena {
    UniqueFd writable;   // for the producer alone, inherited at its spawn
    UniqueFd read_only;  // kept to hand to peers; never mapped by its holder
    std::uint64_t bytes = 0;
};

// A new arena of `bytes` (sealed against shrinking, growing and further seals), named
// `label` in /proc/PID/maps. Both descriptors close-on-exec. Throws SegmentError.
Arena create_arena(const std::string& label, std::uint64_t bytes);

}  // namespace comfy::ipc
