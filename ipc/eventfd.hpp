#pragma once
// An eventfd doorbell: a consumer that waits inside an event loop (epoll, Boost.Asio)
// watches fd() for readability; a producer rings it with signal().

namespace comfy::ipc {

class EventFd {
public:
    // Creates a non-blocking eventfd; throws std::system_error when the kernel refuses.
    EventFd();
    // Takes ownership of an inherited descriptor (a child that got it across spawn).
    explicit EventFd(int adopted_fd) noexcept;
    ~EventFd();
    EventFd(EventFd&& other) noexcept;
    EventFd& operator=(EventFd&& other) noexcept;
    EventFd(const EventFd&) = delete;
    EventFd& operator=(const EventFd&) = delete;

    int fd() const noexcept { return fd_; }
    // Adds one to the counter, waking whoever polls the descriptor.
    void signal() const noexcept;
    // Resets the counter to zero; returns false when it was already zero.
    bool drain() const noexcept;
    // Blocks (poll) until readable or the timeout passes; true when readable.
    bool wait_readable(int timeout_ms) const noexcept;

private:
    int fd_ = -1;
};

}  // namespace comfy::ipc
