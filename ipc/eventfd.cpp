#include "ipc/eventfd.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>
#include <utility>

namespace comfy::ipc {

EventFd::EventFd() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
}

EventFd::EventFd(int adopted_fd) noexcept : fd_(adopted_fd) {}

EventFd::~EventFd() {
    if (fd_ >= 0) ::close(fd_);
}

EventFd::EventFd(EventFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

EventFd& EventFd::operator=(EventFd&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
}

void EventFd::signal() const noexcept {
    const std::uint64_t one = 1;
    // EAGAIN means the counter is saturated: the reader is already due to wake.
    [[maybe_unused]] const auto n = ::write(fd_, &one, sizeof one);
}

bool EventFd::drain() const noexcept {
    std::uint64_t count = 0;
    return ::read(fd_, &count, sizeof count) == static_cast<ssize_t>(sizeof count);
}

bool EventFd::wait_readable(int timeout_ms) const noexcept {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, timeout_ms) > 0 && (p.revents & POLLIN);
}

}  // namespace comfy::ipc
