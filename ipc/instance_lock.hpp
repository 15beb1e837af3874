#pragma once
// The instance's lock: an abstract Unix socket bound under the instance's segment name
// ("@comfy-sv-UID-INSTANCE") by its supervisor before it makes anything of the instance,
// and held for its whole life. A second supervisor of the instance cannot bind the name
// while the first lives, whatever has become of the files under /dev/shm and the control
// socket's folder.
//
// Not a lock on a file: any process of the supervisor's user can unlink or rename every
// name the user has, and a lock on the inode a name pointed to is then a lock nobody asks
// about (a second supervisor took the instance when the published copy's name was removed).
// An abstract name has no file: the kernel frees it only when its last descriptor closes,
// and the supervisor's descriptors are out of a same-user process's reach (it is not
// dumpable: no /proc/PID/fd, ptrace or pidfd_getfd). Bound, never listening: a connect to
// it is refused, so nothing reaches the supervisor through it.
//
// Abstract names belong to a network namespace. The supervisor, a shell's and the systemd
// unit's (which has no PrivateNetwork=) share the machine's; a sandboxed worker has its
// own and cannot even see this one. docs/SECURITY.md says what holds across namespaces.

#include "ipc/unique_fd.hpp"

#include <string>

namespace comfy::ipc {

// The abstract socket name for `segment_name` ("/comfy-sv-UID-INSTANCE"), as ss -xa shows
// it: "@comfy-sv-UID-INSTANCE".
std::string instance_lock_name(const std::string& segment_name);

// Binds the instance's abstract name; the descriptor (close-on-exec) holds it until it
// closes. Throws InstanceTaken when a live process holds it, SegmentError for anything else.
UniqueFd take_instance_lock(const std::string& segment_name);

}  // namespace comfy::ipc
