#pragma once
// One named POSIX shared-memory segment per supervisor instance: creation, attach with
// validation, and detection of segments left behind by a dead creator.
//
// Raw POSIX rather than Boost.Interprocess: we need the descriptor for ownership and
// mode checks, and link(2) to publish a fully initialised segment under its name in one
// atomic step, neither of which boost::interprocess::shared_memory_object exposes.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

namespace comfy::ipc {

inline constexpr std::uint64_t kSegmentMagic = 0x31565346'594D4F43ull;  // "COMFYSV1" little-endian

// The first bytes of every segment. These fields never move between layout versions,
// so any build can tell who made a segment and whether its creator still lives.
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

// "/comfy-sv-<uid>-<instance>". Throws SegmentError for an instance name that is empty,
// longer than 48 characters, or has characters other than letters, digits, '-', '_'.
std::string segment_name(const std::string& instance);

enum class SegmentState { absent, live, stale, foreign };

struct SegmentInspection {
    SegmentState state = SegmentState::absent;
    pid_t creator_pid = 0;
    std::string detail;  // why it is stale or foreign, for messages
};

// Looks at a segment without changing it.
SegmentInspection inspect_segment(const std::string& name);

// Removes the segment when, and only when, its creator is gone. True when removed.
bool remove_stale_segment(const std::string& name);

class SharedSegment {
public:
    // Creates and initialises a new segment of `total_bytes` (mode 0600). `initialise`
    // fills in everything after the header before any other process can open the name.
    // A stale segment of the same name is removed first; a live one is an error.
    static SharedSegment create(const std::string& name, std::size_t total_bytes, std::uint32_t layout_version,
                                const std::function<void(std::byte* base, std::size_t size)>& initialise);

    // Maps an existing segment read-only and checks owner, mode, magic, version, size and
    // that its creator is alive. A mismatch throws SegmentError naming the field and both
    // values. Only the creator ever maps a segment writable.
    static SharedSegment attach(const std::string& name, std::uint32_t expected_layout_version);

    // The same for a descriptor the supervisor passed to its child (which takes ownership
    // of `fd`), without the creator check; a participant never opens the segment by name.
    static SharedSegment adopt(int fd, std::uint32_t expected_layout_version);

    SharedSegment(SharedSegment&& other) noexcept;
    SharedSegment& operator=(SharedSegment&& other) noexcept;
    SharedSegment(const SharedSegment&) = delete;
    SharedSegment& operator=(const SharedSegment&) = delete;
    // Unmaps; the creator also removes the name (when it still names this segment).
    ~SharedSegment();

    // Writable only in the creator's mapping; any other process faults on a write.
    std::byte* base() const noexcept { return base_; }
    // The creator's read-only, close-on-exec descriptor of the segment, to hand to its
    // children (its own mapping's descriptor is writable); -1 in any other process.
    int read_only_fd() const noexcept { return read_only_fd_; }
    std::size_t size() const noexcept { return size_; }
    const std::string& name() const noexcept { return name_; }
    const SegmentHeader& header() const noexcept { return *reinterpret_cast<const SegmentHeader*>(base_); }
    bool is_creator() const noexcept { return creator_; }

private:
    SharedSegment(std::string name, int fd, std::byte* base, std::size_t size, bool creator) noexcept;
    static SharedSegment map_read_only(const std::string& name, int fd, std::uint32_t expected_layout_version);
    void release() noexcept;

    std::string name_;
    int fd_ = -1;
    int read_only_fd_ = -1;
    std::byte* base_ = nullptr;
    std::size_t size_ = 0;
    bool creator_ = false;
};

}  // namespace comfy::ipc
