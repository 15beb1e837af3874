#pragma once
// Unix socket pairs, and messages of one datagram with descriptors attached (SCM_RIGHTS):
// how the supervisor hands a running participant what it could not inherit at spawn
// (a call channel to a peer started later, that peer's arena).

#include "ipc/unique_fd.hpp"

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace comfy::ipc {

struct SocketPair {
    UniqueFd first;
    UniqueFd second;
};

// socketpair(AF_UNIX, type | SOCK_CLOEXEC); `type` is SOCK_STREAM or SOCK_SEQPACKET.
// Throws std::system_error.
SocketPair make_socket_pair(int type);

enum class SendResult {
    sent,
    peer_gone,  // the other end is closed (EPIPE, ECONNRESET): its owner is gone
    full,       // the other end's owner does not read: the buffer is full (EAGAIN)
};

// Sends `payload` as one message with `fds` attached, never blocking and never raising
// SIGPIPE. Throws std::system_error on any other failure.
SendResult send_with_descriptors(int socket, std::string_view payload, std::span<const int> fds = {});

struct ReceivedMessage {
    std::string payload;        // empty at end of file
    std::vector<UniqueFd> fds;  // close-on-exec
    bool truncated = false;     // the payload or the descriptors did not fit
};

// Receives one message of at most `max_bytes` with at most `max_fds` descriptors; blocks
// unless the socket is non-blocking. Throws std::system_error (EAGAIN included).
ReceivedMessage receive_with_descriptors(int socket, std::size_t max_bytes, std::size_t max_fds);

// A new read-only descriptor of the file `fd` is open on (through /proc/self/fd): a holder
// of it can map the file for reading, or privately, never write it shared. Close-on-exec.
// Throws std::system_error.
UniqueFd reopen_read_only(int fd);

}  // namespace comfy::ipc
