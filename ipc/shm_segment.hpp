#pragma once
// One shared-memory segment per supervisor instance: creation, attach with validation,
// and detection of segments left behind by a dead creator.
//
// The segment itself is a sealed memfd. Its creator (the supervisor) maps it writable,
// then seals it against every other write and every change of size, and hands read-only
// descriptors of it to its participants: no process can write, shrink or grow it, not even
// one that reopens its descriptor writable through /proc. Under the segment's name in
// /dev/shm ("/comfy-sv-UID-INSTANCE") is its published copy (ipc/published_copy.hpp), which
// processes that find the segment by name read, and whose lock says whether its supervisor
// lives.
//
// Raw POSIX rather than Boost.Interprocess: memfd seals, open file description locks and
// link(2) (to name a fully initialised copy in one step) are the point, and
// boost::interprocess::shared_memory_object exposes none of them.

#include "ipc/bus_error_guard.hpp"
#include "ipc/published_copy.hpp"

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

namespace comfy::ipc {

inline constexpr std::uint64_t kSegmentMagic = 0x31565346'594D4F43ull;  // "COMFYSV1" little-endian

// The first bytes of every segment. These fields never move between layout versions,
// so any build can tell who made a segment. Who made it is for messages only: whether its
// creator lives is the published copy's lock, never these bytes.
struct SegmentHeader {
    std::uint64_t magic;
    std::uint32_t layout_version;
    std::uint32_t header_bytes;  // sizeof(SegmentHeader) in the creator's build
    std::uint64_t total_bytes;
    std::int32_t creator_pid;
    std::uint32_t reserved;
    std::uint64_t creator_start_time;  // clock ticks since boot, from /proc
    std::uint64_t instance_epoch;      // random, new at every creation
};

// A failure a user can meet with a segment; what() is one line saying what and what to do.
class SegmentError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The instance is a live supervisor's: another one cannot start on it while that one runs.
class InstanceTaken : public SegmentError {
public:
    using SegmentError::SegmentError;
};

// "/comfy-sv-<uid>-<instance>". Throws SegmentError for an instance name that is empty,
// longer than 48 characters, or has characters other than letters, digits, '-', '_'.
std::string segment_name(const std::string& instance);

enum class SegmentState { absent, live, stale, foreign };

struct SegmentInspection {
    SegmentState state = SegmentState::absent;
    pid_t creator_pid = 0;  // as its header says (0 when unreadable), for messages
    std::string detail;     // why it is stale or foreign, for messages
};

// Looks at the published copy under `name` without changing it: live while a process
// holds its lock.
SegmentInspection inspect_segment(const std::string& name);

// Removes the copy under `name` when, and only when, nobody holds its lock. True when removed.
bool remove_stale_segment(const std::string& name);

class SharedSegment {
public:
    // Creates and initialises a new segment of `total_bytes`: `initialise` fills in
    // everything after the header before it is sealed and before any other process can
    // see it; then its copy is published under `name`. A stale copy of the name is removed
    // first; a live one throws InstanceTaken.
    static SharedSegment create(const std::string& name, std::size_t total_bytes, std::uint32_t layout_version,
                                const std::function<void(std::byte* base, std::size_t size)>& initialise);

    // Maps the published copy of a live supervisor read-only, guarded against truncation,
    // and checks owner, mode, magic, version and size. A mismatch throws SegmentError
    // naming the field and both values.
    static SharedSegment attach(const std::string& name, std::uint32_t expected_layout_version);

    // Maps the segment itself from the descriptor the supervisor handed its child (which
    // takes ownership of `fd`), once it is known to be sealed as the supervisor seals it; a
    // participant never opens anything by name.
    static SharedSegment adopt(int fd, std::uint32_t expected_layout_version);

    SharedSegment(SharedSegment&& other) noexcept;
    SharedSegment& operator=(SharedSegment&& other) noexcept;
    SharedSegment(const SharedSegment&) = delete;
    SharedSegment& operator=(const SharedSegment&) = delete;
    // Unmaps; the creator also removes its published copy (while the name still names it).
    ~SharedSegment();

    // The creator's: the segment, writable (no other process can write it). An attacher's:
    // the published copy, read-only. A participant's: the segment, read-only.
    std::byte* base() const noexcept { return base_; }
    // The creator's read-only, close-on-exec descriptor of the segment, to hand to its
    // children (its own mapping's descriptor is writable); -1 in any other process.
    int read_only_fd() const noexcept { return read_only_fd_; }
    std::size_t size() const noexcept { return size_; }
    const std::string& name() const noexcept { return name_; }
    const SegmentHeader& header() const noexcept { return *reinterpret_cast<const SegmentHeader*>(base_); }
    bool is_creator() const noexcept { return creator_; }
    // The creator's published copy, which it writes too and repairs; null elsewhere.
    PublishedCopy* published() noexcept { return published_ ? &*published_ : nullptr; }
    // An attacher's copy was truncated while mapped (what was read since may be zeros), or
    // its name now names another file (the supervisor published the copy again): read it
    // again, attached anew. Always false for the creator and a participant.
    bool outdated() const noexcept;

private:
    SharedSegment(std::string name, int fd, std::byte* base, std::size_t size, bool creator) noexcept;
    static SharedSegment map_read_only(const std::string& name, int fd, std::uint32_t expected_layout_version,
                                       bool by_name);
    void release() noexcept;

    std::string name_;
    int fd_ = -1;
    int read_only_fd_ = -1;
    std::byte* base_ = nullptr;
    std::size_t size_ = 0;
    bool creator_ = false;
    std::optional<PublishedCopy> published_;
    bool by_name_ = false;  // an attacher's: the published copy, found by its name
    BusErrorGuard guard_;   // an attacher's mapping of it
};

}  // namespace comfy::ipc
