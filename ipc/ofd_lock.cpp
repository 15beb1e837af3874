#include "ipc/ofd_lock.hpp"

#include "ipc/shm_segment.hpp"

#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace comfy::ipc {

namespace {

// The whole file, whatever its size now or later (l_len 0 runs to the end and beyond).
struct flock whole_file(short type) {
    struct flock lock {};
    lock.l_type = type;
    lock.l_whence = SEEK_SET;
    lock.l_start = 0;
    lock.l_len = 0;
    return lock;
}

}  // namespace

bool take_file_lock(int fd) {
    struct flock lock = whole_file(F_WRLCK);
    return ::fcntl(fd, F_OFD_SETLK, &lock) == 0;
}

bool file_lock_held_elsewhere(int fd) {
    // A read lock conflicts with any other description's write lock, and a supervisor
    // holds only that; the kernel reports the first conflict without taking anything.
    struct flock lock = whole_file(F_RDLCK);
    if (::fcntl(fd, F_OFD_GETLK, &lock) != 0) {
        throw SegmentError(std::string("asking whether a supervisor holds the segment failed: ") +
                           std::strerror(errno) + "; check /dev/shm");
    }
    return lock.l_type != F_UNLCK;
}

}  // namespace comfy::ipc
