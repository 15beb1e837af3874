#include "ipc/arena.hpp"

#include "ipc/descriptor_passing.hpp"
#include "ipc/shm_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace comfy::ipc {

namespace {

[[noreturn]] void fail(const std::string& label, const std::string& call, int err) {
    throw SegmentError("arena " + label + ": " + call + " failed: " + std::strerror(err) +
                       "; raise the open file limit or lower arena_bytes");
}

}  // namespace

Arena create_arena(const std::string& label, std::uint64_t bytes) {
    Arena arena;
    arena.bytes = bytes;
    arena.writable.reset(::memfd_create(label.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!arena.writable) fail(label, "memfd_create", errno);
    // No fallocate, unlike a participant's region: the arena is sized for the largest
    // values a life may hold, and only what the producer writes takes memory.
    if (::ftruncate(arena.writable.get(), static_cast<off_t>(bytes)) != 0) fail(label, "ftruncate", errno);
    // Nobody may shrink it under a reader (who would fault), grow it, or change the seals.
    if (::fcntl(arena.writable.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        fail(label, "sealing", errno);
    }
    try {
        arena.read_only = reopen_read_only(arena.writable.get());
    } catch (const std::system_error& error) {
        fail(label, "reopening read-only", error.code().value());
    }
    return arena;
}

}  // namespace comfy::ipc
