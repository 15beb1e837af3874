#include "ipc/arena.hpp"

#include "ipc/descriptor_passing.hpp"
#include "ipc/sealed_region.hpp"
#include "ipc/shm_segment.hpp"

#include <cerrno>
#include <cstring>
#include <system_error>

namespace comfy::ipc {

Arena create_arena(const std::string& label, std::uint64_t bytes) {
    constexpr const char* kAdvice = "raise the open file limit or lower arena_bytes";
    Arena arena;
    arena.bytes = bytes;
    // Not reserved, unlike a participant's region: the arena is sized for the largest
    // values a life may hold, and only what the producer writes takes memory.
    arena.writable = create_sealed_memfd("arena", label, bytes, false, kAdvice);
    try {
        arena.read_only = reopen_read_only(arena.writable.get());
    } catch (const std::system_error& error) {
        throw SegmentError("arena " + label + ": reopening read-only failed: " + std::strerror(error.code().value()) +
                           "; " + kAdvice);
    }
    return arena;
}

}  // namespace comfy::ipc
