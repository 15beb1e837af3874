#include "ipc/shm_segment.hpp"

#include "ipc/descriptor_passing.hpp"
#include "ipc/ofd_lock.hpp"
#include "ipc/process_identity.hpp"
#include "ipc/sealed_region.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <system_error>
#include <utility>

namespace comfy::ipc {

namespace {

constexpr mode_t kMode = 0600;
// What the creator seals the segment with, once it has mapped it writable: no new
// writable mapping and no write(2) by anyone (its own mapping stays), no change of size,
// no change of seals. A participant refuses a descriptor without them.
constexpr int kSegmentSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL;

[[noreturn]] void fail(const std::string& name, const std::string& what) {
    throw SegmentError("segment " + name + ": " + what);
}

[[noreturn]] void fail_errno(const std::string& name, const std::string& call, int err,
                             const std::string& advice) {
    fail(name, call + " failed: " + std::strerror(err) + "; " + advice);
}

template <class V>
void expect_field(const std::string& name, const char* field, V found, V expected, const char* advice) {
    if (found != expected) {
        fail(name, std::string(field) + " is " + std::to_string(found) + ", expected " + std::to_string(expected) +
                       "; " + advice);
    }
}

std::uint64_t random_epoch() {
    std::uint64_t value = 0;
    while (value == 0) {
        if (::getrandom(&value, sizeof value, 0) != static_cast<ssize_t>(sizeof value)) {
            throw SegmentError("getrandom failed: " + std::string(std::strerror(errno)));
        }
    }
    return value;
}

// The state of the copy `fd` is open on, without changing it.
SegmentInspection inspect_open(int fd) {
    SegmentInspection result;
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        result.state = SegmentState::foreign;
        result.detail = std::string("cannot be looked at (") + std::strerror(errno) + ")";
        return result;
    }
    if (st.st_uid != ::geteuid()) {
        result.state = SegmentState::foreign;
        result.detail = "owned by uid " + std::to_string(st.st_uid) + ", not " + std::to_string(::geteuid());
        return result;
    }
    SegmentHeader header{};
    const bool readable = st.st_size >= static_cast<off_t>(sizeof header) &&
                          ::pread(fd, &header, sizeof header, 0) == static_cast<ssize_t>(sizeof header) &&
                          header.magic == kSegmentMagic;
    if (readable) result.creator_pid = header.creator_pid;
    // The lock first: a live supervisor's copy is live whatever another process wrote
    // into it or cut off it.
    if (file_lock_held_elsewhere(fd)) {
        result.state = SegmentState::live;
        return result;
    }
    if (!readable) {
        result.state = SegmentState::foreign;
        result.detail = "not a comfy-supervisor segment (size " + std::to_string(st.st_size) + ", no magic)";
        return result;
    }
    result.state = SegmentState::stale;
    result.detail = "no supervisor holds it (its creator was pid " + std::to_string(header.creator_pid) + ")";
    return result;
}

// Removes "<name>.init-<pid>" files left by creators that died mid-publication.
void remove_dead_initialisers(const std::string& name) {
    const std::string prefix = name.substr(1) + ".init-";
    DIR* dir = ::opendir("/dev/shm");
    if (dir == nullptr) return;
    while (const dirent* entry = ::readdir(dir)) {
        const std::string file = entry->d_name;
        if (file.rfind(prefix, 0) != 0) continue;
        const pid_t pid = static_cast<pid_t>(std::strtol(file.c_str() + prefix.size(), nullptr, 10));
        if (pid > 0 && !process_start_time(pid)) ::shm_unlink(("/" + file).c_str());
    }
    ::closedir(dir);
}

}  // namespace

std::string segment_name(const std::string& instance) {
    if (instance.empty() || instance.size() > 48) {
        throw SegmentError("instance name '" + instance + "' must have 1 to 48 characters");
    }
    for (const char c : instance) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                        c == '_';
        if (!ok) {
            throw SegmentError("instance name '" + instance +
                               "' may hold only letters, digits, '-' and '_'; choose another --instance");
        }
    }
    return "/comfy-sv-" + std::to_string(::geteuid()) + "-" + instance;
}

SegmentInspection inspect_segment(const std::string& name) {
    const UniqueFd fd(::shm_open(name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0));
    if (fd) return inspect_open(fd.get());
    SegmentInspection result;
    if (errno != ENOENT) {
        result.state = SegmentState::foreign;
        result.detail = std::string("cannot be opened (") + std::strerror(errno) + ")";
    }
    return result;
}

bool remove_stale_segment(const std::string& name) {
    const UniqueFd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0));
    if (!fd || inspect_open(fd.get()).state != SegmentState::stale) return false;
    // Locked while it goes: a supervisor starting meanwhile finds it held and stops,
    // rather than removing the copy that this one might just have published.
    if (!take_file_lock(fd.get())) return false;
    struct stat ours {}, named {};
    if (::fstat(fd.get(), &ours) != 0 || ::stat(shm_path(name).c_str(), &named) != 0 || ours.st_ino != named.st_ino ||
        ours.st_dev != named.st_dev) {
        return false;
    }
    return ::shm_unlink(name.c_str()) == 0;
}

SharedSegment SharedSegment::create(const std::string& name, std::size_t total_bytes, std::uint32_t layout_version,
                                    const std::function<void(std::byte*, std::size_t)>& initialise) {
    if (total_bytes < sizeof(SegmentHeader)) fail(name, "size " + std::to_string(total_bytes) + " is too small");
    remove_dead_initialisers(name);
    const auto existing = inspect_segment(name);
    if (existing.state == SegmentState::live) {
        throw InstanceTaken("segment " + name + ": in use by a live supervisor (pid " +
                            std::to_string(existing.creator_pid) + " by its header); stop it or choose another --instance");
    }
    if (existing.state == SegmentState::foreign) {
        fail(name, existing.detail + "; remove " + shm_path(name) + " by hand if it is not in use");
    }
    if (existing.state == SegmentState::stale) remove_stale_segment(name);

    UniqueFd fd = create_sealable_memfd("segment", "comfy-sv-segment", total_bytes, true,
                                        "free memory or lower the capacities");
    void* mapped = ::mmap(nullptr, total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (mapped == MAP_FAILED) fail_errno(name, "mmap", errno, "free memory");
    SharedSegment segment(name, fd.release(), static_cast<std::byte*>(mapped), total_bytes, true);
    auto* header = new (segment.base_) SegmentHeader{};
    header->magic = kSegmentMagic;
    header->layout_version = layout_version;
    header->header_bytes = sizeof(SegmentHeader);
    header->total_bytes = total_bytes;
    header->creator_pid = ::getpid();
    header->creator_start_time = process_start_time(::getpid()).value_or(0);
    header->instance_epoch = random_epoch();
    initialise(segment.base_, total_bytes);
    // Sealed only now, with this process's writable mapping in place: from here on nobody
    // can map it writable or write(2) it, nor change its size, whatever descriptor they hold.
    if (::fcntl(segment.fd_, F_ADD_SEALS, kSegmentSeals) != 0) {
        fail_errno(name, "sealing", errno, "the kernel must be Linux 5.1 or later (F_SEAL_FUTURE_WRITE)");
    }
    // Reopening through /proc gives a new open file description with its own, lesser, mode.
    try {
        segment.read_only_fd_ = reopen_read_only(segment.fd_).release();
    } catch (const std::system_error& error) {
        fail_errno(name, "reopening read-only", error.code().value(), "check that /proc is mounted");
    }
    segment.published_ = PublishedCopy::publish(name, segment.base_, total_bytes);
    return segment;
}

SharedSegment SharedSegment::attach(const std::string& name, std::uint32_t expected_layout_version) {
    // Read-only: an attacher by name (comfyctl, a test) never writes the supervisor's copy.
    const int fd = ::shm_open(name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0);
    if (fd < 0) {
        fail_errno(name, "shm_open", errno,
                   errno == ENOENT ? "is the supervisor running with this --instance?" : "check /dev/shm");
    }
    bool live = false;
    try {
        live = file_lock_held_elsewhere(fd);
    } catch (...) {
        ::close(fd);
        throw;
    }
    if (!live) {
        ::close(fd);
        fail(name, "no supervisor holds it (stale segment); start the supervisor again, it removes it");
    }
    return map_read_only(name, fd, expected_layout_version, true);
}

SharedSegment SharedSegment::adopt(int fd, std::uint32_t expected_layout_version) {
    // No liveness check: the supervisor handed this descriptor to its own child, which dies
    // with it, and inside a sandbox the supervisor's pid is not even visible.
    const std::string name = "(descriptor " + std::to_string(fd) + ")";
    const int seals = ::fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & kSegmentSeals) != kSegmentSeals) {
        ::close(fd);
        fail(name, "is not the sealed segment the supervisor hands down; a participant must be started by "
                   "comfy-supervisor of the same build");
    }
    return map_read_only(name, fd, expected_layout_version, false);
}

SharedSegment SharedSegment::map_read_only(const std::string& name, int fd, std::uint32_t expected_layout_version,
                                           bool by_name) {
    auto refuse = [&](auto&& check) {
        try {
            check();
        } catch (...) {
            ::close(fd);
            throw;
        }
    };
    struct stat st {};
    refuse([&] {
        if (::fstat(fd, &st) != 0) fail_errno(name, "fstat", errno, "check /dev/shm");
        expect_field(name, "owner uid", st.st_uid, ::geteuid(), "a segment of another user is never attached");
        if (by_name && (st.st_mode & 0777) != kMode) {
            char found[8];
            std::snprintf(found, sizeof found, "%03o", static_cast<unsigned>(st.st_mode & 0777));
            fail(name, std::string("mode is ") + found + ", expected 600; remove the segment and restart the supervisor");
        }
        if (st.st_size < static_cast<off_t>(sizeof(SegmentHeader))) {
            fail(name, "size is " + std::to_string(st.st_size) + ", smaller than its header; remove it and restart");
        }
    });
    const auto size = static_cast<std::size_t>(st.st_size);
    void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (mapped == MAP_FAILED) refuse([&] { fail_errno(name, "mmap", errno, "free memory"); });
    SharedSegment segment(name, fd, static_cast<std::byte*>(mapped), size, false);
    // A copy found by name can be truncated under us from now on, before the header is read.
    if (by_name) {
        segment.by_name_ = true;
        segment.guard_ = BusErrorGuard(mapped, size, PROT_READ);
    }
    const SegmentHeader& h = segment.header();
    const char* rebuild = "this program and the supervisor come from different builds; use matching versions";
    expect_field(name, "magic", h.magic, kSegmentMagic, "this is not a comfy-supervisor segment");
    expect_field(name, "layout_version", h.layout_version, expected_layout_version, rebuild);
    expect_field(name, "header_bytes", h.header_bytes, std::uint32_t{sizeof(SegmentHeader)}, rebuild);
    expect_field(name, "total_bytes", h.total_bytes, std::uint64_t{size}, "the segment is damaged; restart the supervisor");
    return segment;
}

bool SharedSegment::outdated() const noexcept {
    if (!by_name_) return false;
    if (guard_.tripped()) return true;
    struct stat ours {}, named {};
    return ::fstat(fd_, &ours) != 0 || ::stat(shm_path(name_).c_str(), &named) != 0 || ours.st_ino != named.st_ino ||
           ours.st_dev != named.st_dev;
}

SharedSegment::SharedSegment(std::string name, int fd, std::byte* base, std::size_t size, bool creator) noexcept
    : name_(std::move(name)), fd_(fd), base_(base), size_(size), creator_(creator) {}

SharedSegment::SharedSegment(SharedSegment&& other) noexcept
    : name_(std::move(other.name_)),
      fd_(std::exchange(other.fd_, -1)),
      read_only_fd_(std::exchange(other.read_only_fd_, -1)),
      base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      creator_(std::exchange(other.creator_, false)),
      published_(std::move(other.published_)),
      by_name_(std::exchange(other.by_name_, false)),
      guard_(std::move(other.guard_)) {
    other.published_.reset();
}

SharedSegment& SharedSegment::operator=(SharedSegment&& other) noexcept {
    if (this != &other) {
        release();
        name_ = std::move(other.name_);
        fd_ = std::exchange(other.fd_, -1);
        read_only_fd_ = std::exchange(other.read_only_fd_, -1);
        base_ = std::exchange(other.base_, nullptr);
        size_ = std::exchange(other.size_, 0);
        creator_ = std::exchange(other.creator_, false);
        published_ = std::move(other.published_);
        other.published_.reset();
        by_name_ = std::exchange(other.by_name_, false);
        guard_ = std::move(other.guard_);
    }
    return *this;
}

SharedSegment::~SharedSegment() { release(); }

void SharedSegment::release() noexcept {
    published_.reset();  // the name goes (while it names our copy), then its lock
    guard_ = BusErrorGuard();  // unguarded before it is unmapped
    if (base_ != nullptr) ::munmap(base_, size_);
    if (fd_ >= 0) ::close(fd_);
    if (read_only_fd_ >= 0) ::close(read_only_fd_);
    base_ = nullptr;
    fd_ = -1;
    read_only_fd_ = -1;
    creator_ = false;
    by_name_ = false;
}

}  // namespace comfy::ipc
