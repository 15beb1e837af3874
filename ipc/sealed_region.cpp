#include "ipc/sealed_region.hpp"

#include "ipc/shm_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace comfy::ipc {

namespace {

constexpr int kSizeSeals = F_SEAL_SHRINK | F_SEAL_GROW;

[[noreturn]] void fail(const std::string& label, const std::string& what) {
    throw SegmentError("region " + label + ": " + what);
}

constexpr const char* kRegionAdvice = "free memory or raise the memlock and file limits";

[[noreturn]] void fail_errno(const std::string& label, const std::string& call, int err) {
    fail(label, call + " failed: " + std::strerror(err) + "; " + kRegionAdvice);
}

std::byte* map(int fd, const std::string& label, std::size_t bytes, Access access) {
    const int protection = access == Access::read_write ? PROT_READ | PROT_WRITE : PROT_READ;
    void* mapped = ::mmap(nullptr, bytes, protection, MAP_SHARED, fd, 0);
    if (mapped == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        fail_errno(label, "mmap", err);
    }
    return static_cast<std::byte*>(mapped);
}

}  // namespace

UniqueFd create_sealable_memfd(const std::string& kind, const std::string& label, std::uint64_t bytes,
                               bool reserve_pages, const std::string& advice) {
    const auto fail_at = [&](const std::string& step, int err) {
        throw SegmentError(kind + " " + label + ": " + step + " failed: " + std::strerror(err) + "; " + advice);
    };
    UniqueFd fd(::memfd_create(label.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!fd) fail_at("memfd_create", errno);
    if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) fail_at("ftruncate", errno);
    if (reserve_pages) {
        if (const int err = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes)); err != 0) {
            fail_at("reserving the pages", err);
        }
    }
    return fd;
}

UniqueFd create_sealed_memfd(const std::string& kind, const std::string& label, std::uint64_t bytes,
                             bool reserve_pages, const std::string& advice) {
    UniqueFd fd = create_sealable_memfd(kind, label, bytes, reserve_pages, advice);
    // F_SEAL_SEAL as well: nobody may later undo or add seals.
    if (::fcntl(fd.get(), F_ADD_SEALS, kSizeSeals | F_SEAL_SEAL) != 0) {
        throw SegmentError(kind + " " + label + ": sealing failed: " + std::strerror(errno) + "; " + advice);
    }
    return fd;
}

SealedRegion SealedRegion::create(const std::string& label, std::size_t bytes, Access access) {
    const int fd = create_sealed_memfd("region", label, bytes, true, kRegionAdvice).release();
    return SealedRegion(fd, map(fd, label, bytes, access), bytes);
}

SealedRegion SealedRegion::adopt(int fd, const std::string& label, std::size_t bytes, Access access) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        fail(label, "descriptor " + std::to_string(fd) + " is not open (" + std::strerror(err) +
                        "); a participant must be started by comfy-supervisor");
    }
    const int seals = ::fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & kSizeSeals) != kSizeSeals || static_cast<std::size_t>(st.st_size) != bytes) {
        ::close(fd);
        fail(label, "descriptor " + std::to_string(fd) + " is not the sealed region of " + std::to_string(bytes) +
                        " bytes the supervisor makes; this program and the supervisor may come from different builds");
    }
    return SealedRegion(fd, map(fd, label, bytes, access), bytes);
}

SealedRegion::SealedRegion(SealedRegion&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

SealedRegion& SealedRegion::operator=(SealedRegion&& other) noexcept {
    if (this != &other) {
        release();
        fd_ = std::exchange(other.fd_, -1);
        base_ = std::exchange(other.base_, nullptr);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

SealedRegion::~SealedRegion() { release(); }

void SealedRegion::release() noexcept {
    if (base_ != nullptr) ::munmap(base_, size_);
    if (fd_ >= 0) ::close(fd_);
    base_ = nullptr;
    fd_ = -1;
    size_ = 0;
}

}  // namespace comfy::ipc
