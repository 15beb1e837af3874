#include "ipc/published_copy.hpp"

#include "ipc/instance_lock.hpp"
#include "ipc/ofd_lock.hpp"
#include "ipc/shm_segment.hpp"
#include "ipc/unique_fd.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace comfy::ipc {

namespace {

constexpr mode_t kMode = 0600;
constexpr int kProtection = PROT_READ | PROT_WRITE;

[[noreturn]] void fail(const std::string& name, const std::string& what) {
    throw SegmentError("segment " + name + ": " + what);
}

[[noreturn]] void fail_errno(const std::string& name, const std::string& step, int err, const std::string& advice) {
    fail(name, step + " failed: " + std::strerror(err) + "; " + advice);
}

// A copy being made: a locked file under a private name beside the segment's ("NAME.init-PID",
// which ipc/shm_segment.cpp sweeps away when its maker is gone), filled and ready to be named.
struct Staged {
    UniqueFd fd;
    std::string name;  // the private one
};

Staged stage(const std::string& name, const std::byte* source, std::size_t bytes) {
    Staged staged{UniqueFd(), name + ".init-" + std::to_string(::getpid())};
    ::shm_unlink(staged.name.c_str());  // one a failed republish of ours left
    staged.fd.reset(::shm_open(staged.name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW, kMode));
    if (!staged.fd) fail_errno(name, "shm_open(" + staged.name + ")", errno, "check that /dev/shm is mounted and writable");
    const auto abandon = [&](const std::string& step, int err, const std::string& advice) {
        ::shm_unlink(staged.name.c_str());
        fail_errno(name, step, err, advice);
    };
    const int fd = staged.fd.get();
    if (::fchmod(fd, kMode) != 0) abandon("fchmod", errno, "check the permissions of /dev/shm");
    // Locked before it has the name: the name never names a live copy without its lock.
    if (!take_file_lock(fd)) abandon("locking it", errno, "check /dev/shm");
    if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) abandon("ftruncate", errno, "free space in /dev/shm");
    // Reserved now, so a /dev/shm too small fails here rather than as SIGBUS later.
    if (const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0) {
        abandon("reserving " + std::to_string(bytes) + " bytes", err, "free space in /dev/shm or lower the capacities");
    }
    // Written rather than mapped: nobody can read it until it is named, whole.
    for (std::size_t done = 0; done < bytes;) {
        const ssize_t wrote = ::pwrite(fd, source + done, bytes - done, static_cast<off_t>(done));
        if (wrote < 0 && errno == EINTR) continue;
        if (wrote <= 0) abandon("writing the copy", wrote < 0 ? errno : ENOSPC, "free space in /dev/shm");
        done += static_cast<std::size_t>(wrote);
    }
    return staged;
}

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// Whether another live process holds the file now under `name`.
bool held_by_another(const std::string& name) {
    const UniqueFd other(::shm_open(name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0));
    return other && file_lock_held_elsewhere(other.get());
}

}  // namespace

std::string shm_path(const std::string& name) { return "/dev/shm" + name; }

PublishedCopy PublishedCopy::publish(const std::string& name, const std::byte* source, std::size_t bytes) {
    // First: a second supervisor stops here, before it has made or removed any file.
    UniqueFd instance_lock = take_instance_lock(name);
    Staged staged = stage(name, source, bytes);
    // link(2) names it only where nothing is named yet: two supervisors never both win.
    if (::link(shm_path(staged.name).c_str(), shm_path(name).c_str()) != 0) {
        const int err = errno;
        ::shm_unlink(staged.name.c_str());
        if (err == EEXIST) {
            throw InstanceTaken("segment " + name +
                                ": another supervisor took this instance at the same moment; choose another --instance");
        }
        fail_errno(name, "publishing it", err, "check /dev/shm");
    }
    ::shm_unlink(staged.name.c_str());
    void* mapped = ::mmap(nullptr, bytes, kProtection, MAP_SHARED, staged.fd.get(), 0);
    if (mapped == MAP_FAILED) {
        const int err = errno;
        ::shm_unlink(name.c_str());
        fail_errno(name, "mmap", err, "free memory");
    }
    return PublishedCopy(name, std::move(instance_lock), staged.fd.release(), static_cast<std::byte*>(mapped), bytes);
}

PublishedCopy::PublishedCopy(std::string name, UniqueFd instance_lock, int fd, std::byte* base, std::size_t size)
    : name_(std::move(name)),
      instance_lock_(std::move(instance_lock)),
      fd_(fd),
      base_(base),
      size_(size),
      guard_(base, size, kProtection) {}

PublishedCopy::PublishedCopy(PublishedCopy&& other) noexcept
    : name_(std::move(other.name_)),
      instance_lock_(std::move(other.instance_lock_)),
      fd_(std::exchange(other.fd_, -1)),
      base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(other.mapped_),
      guard_(std::move(other.guard_)) {}

PublishedCopy& PublishedCopy::operator=(PublishedCopy&& other) noexcept {
    if (this != &other) {
        release();
        name_ = std::move(other.name_);
        instance_lock_ = std::move(other.instance_lock_);
        fd_ = std::exchange(other.fd_, -1);
        base_ = std::exchange(other.base_, nullptr);
        size_ = std::exchange(other.size_, 0);
        mapped_ = other.mapped_;
        guard_ = std::move(other.guard_);
    }
    return *this;
}

PublishedCopy::~PublishedCopy() { release(); }

void PublishedCopy::release() noexcept {
    if (fd_ >= 0) {
        // The name goes only while it names this copy, never a successor's; then the lock.
        struct stat ours {}, named {};
        if (::fstat(fd_, &ours) == 0 && ::stat(shm_path(name_).c_str(), &named) == 0 && same_file(ours, named)) {
            ::shm_unlink(name_.c_str());
        }
    }
    guard_ = BusErrorGuard();  // unguarded before it is unmapped
    if (base_ != nullptr) ::munmap(base_, size_);
    if (fd_ >= 0) ::close(fd_);
    base_ = nullptr;
    fd_ = -1;
    instance_lock_.reset();  // last: a successor that takes it finds no copy of ours
}

std::optional<std::string> PublishedCopy::damage() const {
    if (!mapped_) return std::string("is not mapped here: publishing it again failed");
    struct stat ours {};
    if (::fstat(fd_, &ours) != 0) return "cannot be looked at (" + std::string(std::strerror(errno)) + ")";
    if (static_cast<std::size_t>(ours.st_size) != size_) {
        return "was resized from " + std::to_string(size_) + " to " + std::to_string(ours.st_size) + " bytes";
    }
    if (guard_.tripped()) return "was truncated under a write, then grown again";
    struct stat named {};
    if (::stat(shm_path(name_).c_str(), &named) != 0) return "lost its name";
    if (!same_file(ours, named)) return "lost its name to another file";
    return std::nullopt;
}

void PublishedCopy::republish(const std::byte* source) {
    Staged staged = stage(name_, source, size_);
    const std::string path = shm_path(name_);
    const auto abandon = [&](const std::string& what) {
        ::shm_unlink(staged.name.c_str());
        fail(name_, what);
    };
    struct stat ours {}, named {};
    const bool named_at_all = ::stat(path.c_str(), &named) == 0;
    const bool ours_named = named_at_all && ::fstat(fd_, &ours) == 0 && same_file(ours, named);
    if (named_at_all && !ours_named && held_by_another(name_)) {
        abandon("another live process holds a file under its name now; comfyctl reads that one");
    }
    // Over our own damaged copy or a file nobody holds, in one step; where nothing is
    // named, only if nothing got there first.
    const int named_now = named_at_all ? ::rename(shm_path(staged.name).c_str(), path.c_str())
                                       : ::link(shm_path(staged.name).c_str(), path.c_str());
    if (named_now != 0) abandon(std::string("naming the new copy failed: ") + std::strerror(errno));
    ::shm_unlink(staged.name.c_str());  // gone already after a rename
    ::close(std::exchange(fd_, staged.fd.release()));  // the old file's lock goes with it
    // At the same address, in one step: every pointer into the copy stays good.
    mapped_ = ::mmap(base_, size_, kProtection, MAP_SHARED | MAP_FIXED, fd_, 0) != MAP_FAILED;
    if (!mapped_) {
        const int err = errno;
        // A failed MAP_FIXED may have unmapped the old pages: private ones in their place,
        // so that the writes go on harmlessly until the next try.
        ::mmap(base_, size_, kProtection, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        fail_errno(name_, "mapping the new copy", err, "free memory");
    }
    guard_.rearm();
}

}  // namespace comfy::ipc
