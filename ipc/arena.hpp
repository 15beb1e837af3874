#pragma once
// A value arena: the memory one producer writes values in for one consumer (a pack life's
// node outputs for the host, or what a host life sends one pack life). A sealed memfd that
// only its producer writes: the producer gets it writable, and its consumer alone a
// read-only descriptor, so no other process is handed what it holds. It is sparse: memory
// is used only where the producer writes, and the kernel frees it when the last
// descriptor and mapping go, so a dead life's arena lives exactly as long as its consumer
// still reads from it.

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
