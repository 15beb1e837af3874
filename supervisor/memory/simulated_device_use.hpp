#pragma once
// The simulated device's accounting, which the supervisor alone keeps. The simulated
// device stands for a GPU that every participant shares and whose driver alone decides
// what each process gets: a participant asks for each allocation (device_allocate) and
// says what it gave back (device_release), and this, the account's one writer, decides in
// the order the asks arrive, so "free" is exact machine-wide and no participant can write
// another's use. What it decides goes into the segment (DeviceFigures), where every
// participant reads the device's free memory, and to the census reader's snapshots.
//
// A life's use is forgotten when the life ends: a dead process's allocations went with it.
// A participant can still hold all of the device that is free, as a process can fill a
// real GPU; the account says which one does.

#include "shared/memory_arithmetic.hpp"
#include "supervisor/memory/segment_writer.hpp"

#include <cstdint>
#include <vector>

namespace comfy::supervisor {

class SimulatedDeviceUse {
public:
    // A device of `total_bytes` shared by `participants` slots, published through `writes`.
    SimulatedDeviceUse(Bytes total_bytes, std::uint32_t participants, SegmentWriter& writes);

    // Gives the life in `slot` `bytes` more when they fit beside everyone's use; whether
    // they did.
    bool allocate(std::uint32_t slot, Bytes bytes);
    // The life in `slot` gave `bytes` back (never more than it holds).
    void release(std::uint32_t slot, Bytes bytes);
    // The life in `slot` ended, or a new one starts: it holds nothing.
    void forget(std::uint32_t slot);

    Bytes total() const noexcept { return total_; }
    Bytes used() const noexcept { return used_; }

private:
    void set(std::uint32_t slot, Bytes bytes);

    Bytes total_;
    Bytes used_ = 0;  // the sum of by_slot_, never above total_
    std::vector<Bytes> by_slot_;
    SegmentWriter& writes_;
};

}  // namespace comfy::supervisor
