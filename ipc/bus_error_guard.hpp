#pragma once
// Mappings of a file that another process may shrink. Reading or writing a page that a
// truncation took away raises SIGBUS, whose default kills the process, and any process of
// the user can truncate the segment's published copy (ipc/published_copy.hpp) at any
// moment, between any two instructions of its writer or a reader. A guarded mapping is
// instead replaced, at its first such fault, by zero-filled private memory at the same
// address, of the same size and protection: the faulting access is then retried there and
// completes, touching nothing shared, and the guard remembers that it happened, for its
// owner to find out at its next look (tripped()).
//
// One process-wide SIGBUS handler serves every guard. A fault outside every guarded
// mapping is a bug of this process, and still ends it with SIGBUS.

#include <cstddef>

namespace comfy::ipc {

class BusErrorGuard {
public:
    // How many mappings one process can guard at once.
    static constexpr int kMaxGuards = 8;

    BusErrorGuard() = default;
    // Guards the mapping [base, base + bytes), mapped with `protection` (PROT_* bits),
    // installing the handler the first time. Throws SegmentError when kMaxGuards mappings
    // are guarded already or the handler cannot be installed.
    BusErrorGuard(void* base, std::size_t bytes, int protection);
    BusErrorGuard(BusErrorGuard&& other) noexcept;
    BusErrorGuard& operator=(BusErrorGuard&& other) noexcept;
    BusErrorGuard(const BusErrorGuard&) = delete;
    BusErrorGuard& operator=(const BusErrorGuard&) = delete;
    // Stops guarding (before its owner unmaps the memory).
    ~BusErrorGuard();

    // Whether the mapping was replaced by private memory since it was guarded or rearmed.
    bool tripped() const noexcept;
    // The owner mapped its file at the same place again: a later fault counts anew.
    void rearm() noexcept;

private:
    void release() noexcept;

    int place_ = -1;
};

}  // namespace comfy::ipc
