#pragma once
// The segment's published copy: a file under the segment's name in /dev/shm, for the
// processes that find the segment by its name (comfyctl, the soak, the tests). The
// supervisor and its participants never read it: they map the segment itself, a sealed
// memfd (ipc/shm_segment.hpp). Its creator holds the instance's lock (ipc/instance_lock.hpp),
// taken before anything is made and kept with the copy, which no removal of a name can
// lose; and it holds the copy in two ways:
// - a lock the kernel owns on the file (ipc/ofd_lock.hpp), taken before the file has the
//   name and kept for the creator's whole life: a copy is live exactly while that lock is
//   held, whatever its header says;
// - a writable mapping guarded against SIGBUS (ipc/bus_error_guard.hpp): any process of
//   the user can open the name writable and truncate the file, and the creator's writes
//   then go on into private memory until it publishes the copy again (republish()).
// Raw POSIX for the same reasons as ipc/shm_segment.hpp.

#include "ipc/bus_error_guard.hpp"
#include "ipc/unique_fd.hpp"

#include <cstddef>
#include <optional>
#include <string>

namespace comfy::ipc {

class PublishedCopy {
public:
    // Takes the instance's lock, then publishes the `bytes` at `source` under `name`
    // ("/comfy-sv-..."): a new file of mode 0600, locked, filled, then given the name in one
    // step. Throws InstanceTaken when a live process holds the instance's lock, or the name
    // is taken meanwhile, SegmentError for anything else.
    static PublishedCopy publish(const std::string& name, const std::byte* source, std::size_t bytes);

    PublishedCopy(PublishedCopy&& other) noexcept;
    PublishedCopy& operator=(PublishedCopy&& other) noexcept;
    PublishedCopy(const PublishedCopy&) = delete;
    PublishedCopy& operator=(const PublishedCopy&) = delete;
    // Removes the name when it still names this copy, unmaps it, drops its lock, then the
    // instance's.
    ~PublishedCopy();

    // The copy's memory, writable here; it stays at this address for the copy's life.
    std::byte* base() const noexcept { return base_; }

    // What another process did to the copy, in a few words ("was resized from N to 0
    // bytes", "lost its name"); nothing while it is whole and named.
    std::optional<std::string> damage() const;

    // Publishes the `source` bytes again, as publish() did, at the same address, replacing
    // the damaged copy under the name; refused (SegmentError) when another live process
    // holds a file under the name now.
    void republish(const std::byte* source);

private:
    PublishedCopy(std::string name, UniqueFd instance_lock, int fd, std::byte* base, std::size_t size);
    void release() noexcept;

    std::string name_;
    UniqueFd instance_lock_;  // for the copy's whole life, through every republish
    int fd_ = -1;             // open for writing: it holds the file's lock
    std::byte* base_ = nullptr;
    std::size_t size_ = 0;
    bool mapped_ = true;  // false after a republish that named its file but could not map it
    BusErrorGuard guard_;
};

// "/dev/shm" + name: where a POSIX shared-memory name lives on Linux.
std::string shm_path(const std::string& name);

}  // namespace comfy::ipc
