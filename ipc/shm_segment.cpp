#include "ipc/shm_segment.hpp"

#include "ipc/descriptor_passing.hpp"

#include "ipc/process_identity.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <cstring>
#include <utility>
#include <system_error>

namespace comfy::ipc {

namespace {

constexpr const char* kShmDir = "/dev/shm";
constexpr mode_t kMode = 0600;

std::string path_of(const std::string& name) { return kShmDir + name; }

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

// A read-only look at a segment's identity through a private mapping of its header.
struct HeaderPeek {
    bool exists = false;
    bool readable = false;
    uid_t owner = 0;
    off_t size = 0;
    SegmentHeader header{};
};

HeaderPeek peek_header(const std::string& name) {
    HeaderPeek peek;
    const int fd = ::shm_open(name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0);
    if (fd < 0) {
        peek.exists = errno != ENOENT;
        return peek;
    }
    peek.exists = true;
    struct stat st {};
    if (::fstat(fd, &st) == 0) {
        peek.owner = st.st_uid;
        peek.size = st.st_size;
        if (st.st_size >= static_cast<off_t>(sizeof(SegmentHeader))) {
            peek.readable = ::pread(fd, &peek.header, sizeof peek.header, 0) == static_cast<ssize_t>(sizeof peek.header);
        }
    }
    ::close(fd);
    return peek;
}

// Removes "<name>.init-<pid>" files left by creators that died mid-creation.
void remove_dead_initialisers(const std::string& name) {
    const std::string prefix = name.substr(1) + ".init-";
    DIR* dir = ::opendir(kShmDir);
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
    const HeaderPeek peek = peek_header(name);
    SegmentInspection result;
    if (!peek.exists) return result;
    if (!peek.readable || peek.header.magic != kSegmentMagic) {
        result.state = SegmentState::foreign;
        result.detail = "not a comfy-supervisor segment (size " + std::to_string(peek.size) + ", no magic)";
        return result;
    }
    if (peek.owner != ::geteuid()) {
        result.state = SegmentState::foreign;
        result.detail = "owned by uid " + std::to_string(peek.owner) + ", not " + std::to_string(::geteuid());
        return result;
    }
    result.creator_pid = peek.header.creator_pid;
    const auto start = process_start_time(peek.header.creator_pid);
    if (!start) {
        result.state = SegmentState::stale;
        result.detail = "creator pid " + std::to_string(peek.header.creator_pid) + " is gone";
    } else if (*start != peek.header.creator_start_time) {
        result.state = SegmentState::stale;
        result.detail = "creator pid " + std::to_string(peek.header.creator_pid) +
                        " was reused by another process (start time " + std::to_string(*start) + ", recorded " +
                        std::to_string(peek.header.creator_start_time) + ")";
    } else {
        result.state = SegmentState::live;
    }
    return result;
}

bool remove_stale_segment(const std::string& name) {
    if (inspect_segment(name).state != SegmentState::stale) return false;
    return ::shm_unlink(name.c_str()) == 0;
}

SharedSegment SharedSegment::create(const std::string& name, std::size_t total_bytes, std::uint32_t layout_version,
                                    const std::function<void(std::byte*, std::size_t)>& initialise) {
    if (total_bytes < sizeof(SegmentHeader)) fail(name, "size " + std::to_string(total_bytes) + " is too small");
    remove_dead_initialisers(name);
    const auto existing = inspect_segment(name);
    if (existing.state == SegmentState::live) {
        fail(name, "in use by a live supervisor (pid " + std::to_string(existing.creator_pid) +
                       "); stop it or choose another --instance");
    }
    if (existing.state == SegmentState::foreign) {
        fail(name, existing.detail + "; remove " + path_of(name) + " by hand if it is not in use");
    }
    if (existing.state == SegmentState::stale) ::shm_unlink(name.c_str());

    // Build the segment under a private name, then link it into place fully formed.
    const std::string init_name = name + ".init-" + std::to_string(::getpid());
    const int fd = ::shm_open(init_name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW, kMode);
    if (fd < 0) fail_errno(name, "shm_open(" + init_name + ")", errno, "check that /dev/shm is mounted and writable");
    auto abandon = [&](const std::string& call, int err, const std::string& advice) {
        ::close(fd);
        ::shm_unlink(init_name.c_str());
        fail_errno(name, call, err, advice);
    };
    if (::fchmod(fd, kMode) != 0) abandon("fchmod", errno, "check the permissions of /dev/shm");
    if (::ftruncate(fd, static_cast<off_t>(total_bytes)) != 0) {
        abandon("ftruncate", errno, "free space in /dev/shm or lower the capacities");
    }
    // Reserve the pages now, so a /dev/shm too small for the segment fails here with a
    // clear error instead of SIGBUS on first touch later.
    if (const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(total_bytes)); err != 0) {
        abandon("reserving " + std::to_string(total_bytes) + " bytes", err, "free space in /dev/shm or lower the capacities");
    }
    void* mapped = ::mmap(nullptr, total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mapped == MAP_FAILED) abandon("mmap", errno, "free memory or space in /dev/shm");
    auto* base = static_cast<std::byte*>(mapped);
    auto* header = new (base) SegmentHeader{};
    header->magic = kSegmentMagic;
    header->layout_version = layout_version;
    header->header_bytes = sizeof(SegmentHeader);
    header->total_bytes = total_bytes;
    header->creator_pid = ::getpid();
    const auto start = process_start_time(::getpid());
    header->creator_start_time = start.value_or(0);
    header->instance_epoch = random_epoch();
    try {
        initialise(base, total_bytes);
    } catch (...) {
        ::munmap(mapped, total_bytes);
        ::close(fd);
        ::shm_unlink(init_name.c_str());
        throw;
    }
    if (::link(path_of(init_name).c_str(), path_of(name).c_str()) != 0) {
        const int err = errno;
        ::munmap(mapped, total_bytes);
        abandon("publishing as " + name, err,
                err == EEXIST ? "another supervisor took this instance at the same moment; choose another --instance"
                              : "check /dev/shm");
    }
    ::shm_unlink(init_name.c_str());
    SharedSegment segment(name, fd, base, total_bytes, true);
    // Reopening through /proc gives a new open file description with its own, lesser, mode.
    try {
        segment.read_only_fd_ = reopen_read_only(fd).release();
    } catch (const std::system_error& error) {
        fail_errno(name, "reopening read-only", error.code().value(), "check that /proc is mounted");
    }
    return segment;
}

SharedSegment SharedSegment::attach(const std::string& name, std::uint32_t expected_layout_version) {
    // Read-only: an attacher by name (comfyctl, a test) never writes the supervisor's segment.
    const int fd = ::shm_open(name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0);
    if (fd < 0) {
        fail_errno(name, "shm_open", errno,
                   errno == ENOENT ? "is the supervisor running with this --instance?" : "check /dev/shm");
    }
    SharedSegment segment = map_read_only(name, fd, expected_layout_version);
    const SegmentHeader& h = segment.header();
    const auto start = process_start_time(h.creator_pid);
    if (!start) {
        fail(name, "creator pid " + std::to_string(h.creator_pid) +
                       " is gone (stale segment); start the supervisor again, it removes it");
    }
    expect_field(name, "creator_start_time", h.creator_start_time, *start,
                 "the creator's pid was reused (stale segment); start the supervisor again, it removes it");
    return segment;
}

SharedSegment SharedSegment::adopt(int fd, std::uint32_t expected_layout_version) {
    // No liveness check: the supervisor handed this descriptor to its own child, which dies
    // with it, and inside a sandbox the supervisor's pid is not even visible.
    return map_read_only("(descriptor " + std::to_string(fd) + ")", fd, expected_layout_version);
}

SharedSegment SharedSegment::map_read_only(const std::string& name, int fd, std::uint32_t expected_layout_version) {
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
        if ((st.st_mode & 0777) != kMode) {
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
    const SegmentHeader& h = segment.header();
    const char* rebuild = "this program and the supervisor come from different builds; use matching versions";
    expect_field(name, "magic", h.magic, kSegmentMagic, "this is not a comfy-supervisor segment");
    expect_field(name, "layout_version", h.layout_version, expected_layout_version, rebuild);
    expect_field(name, "header_bytes", h.header_bytes, std::uint32_t{sizeof(SegmentHeader)}, rebuild);
    expect_field(name, "total_bytes", h.total_bytes, std::uint64_t{size}, "the segment is damaged; restart the supervisor");
    return segment;
}

SharedSegment::SharedSegment(std::string name, int fd, std::byte* base, std::size_t size, bool creator) noexcept
    : name_(std::move(name)), fd_(fd), base_(base), size_(size), creator_(creator) {}

SharedSegment::SharedSegment(SharedSegment&& other) noexcept
    : name_(std::move(other.name_)),
      fd_(std::exchange(other.fd_, -1)),
      read_only_fd_(std::exchange(other.read_only_fd_, -1)),
      base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      creator_(std::exchange(other.creator_, false)) {}

SharedSegment& SharedSegment::operator=(SharedSegment&& other) noexcept {
    if (this != &other) {
        release();
        name_ = std::move(other.name_);
        fd_ = std::exchange(other.fd_, -1);
        read_only_fd_ = std::exchange(other.read_only_fd_, -1);
        base_ = std::exchange(other.base_, nullptr);
        size_ = std::exchange(other.size_, 0);
        creator_ = std::exchange(other.creator_, false);
    }
    return *this;
}

SharedSegment::~SharedSegment() { release(); }

void SharedSegment::release() noexcept {
    if (creator_ && fd_ >= 0) {
        // Remove the name only if it still names our segment, never a successor's.
        struct stat ours {}, named {};
        if (::fstat(fd_, &ours) == 0 && ::stat(path_of(name_).c_str(), &named) == 0 && ours.st_ino == named.st_ino) {
            ::shm_unlink(name_.c_str());
        }
    }
    if (base_ != nullptr) ::munmap(base_, size_);
    if (fd_ >= 0) ::close(fd_);
    if (read_only_fd_ >= 0) ::close(read_only_fd_);
    base_ = nullptr;
    fd_ = -1;
    read_only_fd_ = -1;
    creator_ = false;
}

}  // namespace comfy::ipc
