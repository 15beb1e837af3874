#include "ipc/instance_lock.hpp"

#include "ipc/shm_segment.hpp"

#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace comfy::ipc {

std::string instance_lock_name(const std::string& segment_name) {
    return "@" + (segment_name.rfind('/', 0) == 0 ? segment_name.substr(1) : segment_name);
}

UniqueFd take_instance_lock(const std::string& segment_name) {
    const std::string shown = instance_lock_name(segment_name);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    // sun_path[0] stays 0: the abstract namespace; the name is the bytes after it, no terminator.
    const std::size_t length = shown.size() - 1;
    if (length + 1 > sizeof address.sun_path) {
        throw SegmentError("segment " + segment_name + ": its lock's name is too long; choose a shorter --instance");
    }
    std::memcpy(address.sun_path + 1, shown.data() + 1, length);
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) {
        throw SegmentError("segment " + segment_name + ": making its lock failed: " + std::strerror(errno) +
                           "; check the limit on open files");
    }
    const auto size = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + length);
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), size) != 0) {
        if (errno == EADDRINUSE) {
            throw InstanceTaken("segment " + segment_name + ": in use by a live supervisor (it holds the instance's " +
                                "lock " + shown + "); stop it or choose another --instance");
        }
        throw SegmentError("segment " + segment_name + ": taking its lock " + shown + " failed: " +
                           std::strerror(errno) + "; the supervisor needs Unix sockets (AF_UNIX)");
    }
    return fd;
}

}  // namespace comfy::ipc
