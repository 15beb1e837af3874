#include "supervisor/ops/control_socket_file.hpp"

#include "ipc/shm_segment.hpp"
#include "supervisor/ops/control_server.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace comfy::supervisor {

namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
    throw ControlSocketError("control socket " + path.string() + ": " + what);
}

std::string error_text() { return std::strerror(errno); }

// The folder must be ours and no one else's: another user who could write in it could put
// their own socket where comfyctl looks for ours.
void prepare_folder(const std::filesystem::path& socket_path) {
    const auto folder = socket_path.parent_path();
    if (::mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST) {
        fail(socket_path, "cannot make its folder: " + error_text() + "; check that " +
                              folder.parent_path().string() + " exists and is writable");
    }
    const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        fail(socket_path, "cannot open its folder " + folder.string() + ": " + error_text() +
                              (errno == ELOOP || errno == ENOTDIR ? " (it must be a folder, not a link); remove it" : ""));
    }
    struct stat about {};
    const bool stated = ::fstat(fd, &about) == 0;
    const bool ours = stated && about.st_uid == ::geteuid();
    // Ours but open to others (systemd's RuntimeDirectoryMode defaults to 0755): closed here.
    const bool closed = ours && ((about.st_mode & 077) == 0 || ::fchmod(fd, 0700) == 0);
    ::close(fd);
    if (!ours) {
        fail(socket_path, "its folder " + folder.string() + " belongs to uid " + std::to_string(about.st_uid) +
                              ", not to this user (uid " + std::to_string(::geteuid()) +
                              "); remove it, or set XDG_RUNTIME_DIR to a folder of this user's");
    }
    if (!closed) fail(socket_path, "cannot make its folder " + folder.string() + " mode 0700: " + error_text());
}

// Whether a process listens on the socket at `address`: a connection it has not accepted
// yet (or a full queue of them) is as live as one it has; only a refusal says nobody is there.
bool accepts_connections(const sockaddr_un& address) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return false;
    const bool connected = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
    const bool live = connected || errno == EAGAIN;
    ::close(fd);
    return live;
}

// A socket file left by a supervisor that died goes. The instance's lock already refused a
// live supervisor of this instance in our network namespace (ipc/instance_lock.hpp); one
// in another namespace still accepts on its socket, and its socket is never touched.
// Anything else at the path stays.
void remove_stale(const std::filesystem::path& path, const sockaddr_un& address) {
    struct stat about {};
    if (::lstat(path.c_str(), &about) != 0) {
        if (errno == ENOENT) return;
        fail(path, "cannot inspect it: " + error_text());
    }
    if (!S_ISSOCK(about.st_mode)) fail(path, "something other than a socket is there; remove it");
    if (accepts_connections(address)) {
        throw ipc::InstanceTaken("control socket " + path.string() +
                                 ": in use by a live supervisor (it accepts connections there); stop it or choose "
                                 "another --instance");
    }
    if (::unlink(path.c_str()) != 0) fail(path, "cannot remove the stale socket: " + error_text());
}

}  // namespace

int listen_on_control_socket(const std::filesystem::path& path) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (path.native().size() >= sizeof address.sun_path) {
        fail(path, "the path is longer than a socket's " + std::to_string(sizeof address.sun_path - 1) +
                       " bytes; use a shorter --instance or XDG_RUNTIME_DIR");
    }
    std::memcpy(address.sun_path, path.c_str(), path.native().size());
    prepare_folder(path);
    remove_stale(path, address);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) fail(path, "socket failed: " + error_text());
    // The folder keeps everyone else out already; the mode says so again, for a folder an
    // operator loosened later.
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
        const std::string why = error_text();
        ::close(fd);
        fail(path, "cannot bind: " + why);
    }
    if (::chmod(path.c_str(), 0600) != 0 || ::listen(fd, 16) != 0) {
        const std::string why = error_text();
        ::close(fd);
        ::unlink(path.c_str());
        fail(path, "cannot listen: " + why);
    }
    return fd;
}

}  // namespace comfy::supervisor
