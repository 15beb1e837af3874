#include "ipc/descriptor_passing.hpp"

#include <fcntl.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace comfy::ipc {

namespace {

[[noreturn]] void fail(const char* what) {
    throw std::system_error(errno, std::generic_category(), what);
}

}  // namespace

SocketPair make_socket_pair(int type) {
    int ends[2];
    if (::socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, ends) != 0) fail("socketpair");
    return SocketPair{UniqueFd(ends[0]), UniqueFd(ends[1])};
}

SendResult send_with_descriptors(int socket, std::string_view payload, std::span<const int> fds) {
    iovec part{const_cast<char*>(payload.data()), payload.size()};
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    std::vector<char> control(fds.empty() ? 0 : CMSG_SPACE(fds.size_bytes()));
    if (!fds.empty()) {
        message.msg_control = control.data();
        message.msg_controllen = control.size();
        cmsghdr* header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(fds.size_bytes());
        std::memcpy(CMSG_DATA(header), fds.data(), fds.size_bytes());
    }
    ssize_t sent;
    do {
        sent = ::sendmsg(socket, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (sent < 0 && errno == EINTR);
    if (sent >= 0) return SendResult::sent;
    if (errno == EPIPE || errno == ECONNRESET) return SendResult::peer_gone;
    // ETOOMANYREFS: the descriptors in flight to readers that do not read passed the
    // kernel's limit; the same as a full buffer.
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ETOOMANYREFS) return SendResult::full;
    fail("sendmsg");
}

ReceivedMessage receive_with_descriptors(int socket, std::size_t max_bytes, std::size_t max_fds) {
    ReceivedMessage received;
    received.payload.resize(max_bytes);
    iovec part{received.payload.data(), received.payload.size()};
    std::vector<char> control(CMSG_SPACE(max_fds * sizeof(int)));
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control.data();
    message.msg_controllen = control.size();
    ssize_t got;
    do {
        got = ::recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
    } while (got < 0 && errno == EINTR);
    if (got < 0) fail("recvmsg");
    received.payload.resize(static_cast<std::size_t>(got));
    for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        const std::size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof fd);
            received.fds.emplace_back(fd);
        }
    }
    received.truncated = (message.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
    return received;
}

UniqueFd reopen_read_only(int fd) {
    const std::string self = "/proc/self/fd/" + std::to_string(fd);
    UniqueFd reopened(::open(self.c_str(), O_RDONLY | O_CLOEXEC));
    if (!reopened) fail("reopening read-only through /proc/self/fd");
    return reopened;
}

}  // namespace comfy::ipc
