#pragma once
// A lock the kernel owns, on a whole file: an open file description lock (F_OFD_SETLK).
// The kernel drops it when the last descriptor of its description closes, which is when
// its holder exits, however it exits; nothing written into the file, and no process that
// does not hold the description, can fake it or take it away. A supervisor holds one on
// its segment's published copy for its whole life, and that lock, not the pid its header
// names, says whether the segment is live (ipc/published_copy.hpp).
//
// fcntl record locks rather than flock(2): whether one is held can be asked without
// taking it (F_OFD_GETLK), so a reader that only looks never makes a starting supervisor
// think the instance is taken.

namespace comfy::ipc {

// Takes a write lock on the whole file `fd` is open on (which must be open for writing),
// never waiting. False when another description holds a lock on the file.
bool take_file_lock(int fd);

// Whether a description other than `fd`'s holds a lock on the file `fd` is open on (any
// access mode). Throws SegmentError when the kernel cannot say.
bool file_lock_held_elsewhere(int fd);

}  // namespace comfy::ipc
