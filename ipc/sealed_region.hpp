#pragma once
// Anonymous shared memory (memfd) that one process writes and others map: a participant's
// own region and the simulated device's table. It has no name, so nothing can open it but
// a holder of its descriptor, and nothing is left in /dev/shm when its holders die; its
// size is sealed, so no holder can shrink it under a reader (which would fault on access).
//
// Raw memfd rather than Boost.Interprocess: the anonymous, sealable file is the point, and
// boost::interprocess has no memfd object.

#include "ipc/unique_fd.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace comfy::ipc {

// A new memfd of `bytes` named `label`, close-on-exec, not sealed yet: its creator seals
// it once it has what it needs (the segment's creator maps it writable first, then seals
// it against every other write, ipc/shm_segment.cpp). `reserve_pages` reserves its memory
// now, so a shortage fails here rather than as SIGBUS on first touch; an arena is left
// sparse. Throws SegmentError, one line: "`kind` `label`: the step that failed, why; `advice`".
UniqueFd create_sealable_memfd(const std::string& kind, const std::string& label, std::uint64_t bytes,
                               bool reserve_pages, const std::string& advice);

// The same, sealed at once against shrinking, growing and further seals: a region's, or a
// value arena's (ipc/arena.hpp).
UniqueFd create_sealed_memfd(const std::string& kind, const std::string& label, std::uint64_t bytes,
                             bool reserve_pages, const std::string& advice);

enum class Access { read_only, read_write };

class SealedRegion {
public:
    // A new zero-filled region of `bytes`, its size sealed, mapped as `access` says.
    // `label` names it in /proc/PID/maps and in errors. Throws SegmentError.
    static SealedRegion create(const std::string& label, std::size_t bytes, Access access);

    // Maps a region whose descriptor was handed down (taking ownership of `fd`). Throws
    // SegmentError naming `label` unless it is sealed against resizing and holds `bytes`.
    static SealedRegion adopt(int fd, const std::string& label, std::size_t bytes, Access access);

    SealedRegion() = default;
    SealedRegion(SealedRegion&& other) noexcept;
    SealedRegion& operator=(SealedRegion&& other) noexcept;
    SealedRegion(const SealedRegion&) = delete;
    SealedRegion& operator=(const SealedRegion&) = delete;
    ~SealedRegion();

    // Writable only when mapped read_write; a write otherwise faults in this process.
    std::byte* base() const noexcept { return base_; }
    std::size_t size() const noexcept { return size_; }
    // Close-on-exec; the spawner lets it through to the one child meant to have it.
    int fd() const noexcept { return fd_; }

private:
    SealedRegion(int fd, std::byte* base, std::size_t size) noexcept : fd_(fd), base_(base), size_(size) {}
    void release() noexcept;

    int fd_ = -1;
    std::byte* base_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace comfy::ipc
