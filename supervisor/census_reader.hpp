#pragma once
// The participants' census slots as the supervisor's decisions read them, at a cost that
// follows the slots that changed: every event needs the device's free figure and the
// asker's allocator figures, and with a thousand workers re-reading every census into a
// fresh map per event made the supervisor's CPU per spawn grow with the worker count.
//
// Each slot's census and participant record are kept as last read whole, with the seqlock
// sequence they were read at. A refresh loads each sequence (one atomic load a slot) and
// copies and validates only the records whose sequence moved; the snapshot's figures are
// updated in place, slot by slot. The rules stay those of shared memory as input: a census
// is believed only when it carries the generation the supervisor runs in that slot and
// holds figures a machine can have; a corrupt or stale census costs only its own slot; the
// simulated device's "used" is device_accounting's rule, the device counting as full while
// any record stays mid-write.

#include "shared/records.hpp"
#include "shared/segment_layout.hpp"
#include "supervisor/arbiter/arbiter_io.hpp"
#include "worker/device.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace comfy::supervisor {

class CensusReader {
public:
    // `cuda`: the real device whose driver gives the free figure, or null for the simulated
    // device, whose figures come from the censuses. Both must outlive the reader.
    CensusReader(const SegmentView& view, const worker::Device* cuda);

    // The life the supervisor runs in `slot` (nothing when none runs there): only a census
    // carrying that generation is believed.
    void expect(std::uint32_t slot, std::optional<std::uint32_t> generation);

    // Catches up with the records that changed since the last call.
    void refresh();

    // The world as an event finds it, refreshed: the device's figures and each believable
    // census's allocator figures. Valid until the next call.
    const arbiter::Snapshot& snapshot(std::uint64_t now_ms);

    // The believable censuses as of the last refresh, by slot.
    const std::map<std::uint32_t, CensusRecord>& believable() const noexcept { return believable_; }

private:
    // A record as last read whole, and the sequence it was read at; an odd sequence (the
    // start, or a read that found the record mid-write) never matches, so it is read again.
    template <class T>
    struct Cached {
        static constexpr std::uint32_t kNotRead = 1;
        T value{};
        std::uint32_t sequence = kNotRead;
        bool whole() const noexcept { return (sequence & 1u) == 0; }
    };
    struct Slot {
        Cached<CensusRecord> census;
        Cached<ParticipantRecord> participant;
        std::optional<std::uint32_t> expected;
    };

    // Re-reads `cached` if its sequence moved; true when the cached value changed.
    template <class T>
    static bool catch_up(const ipc::Seqlock<T>& lock, Cached<T>& cached);
    // Puts the slot's census into, or takes it out of, the believable set and the figures.
    void judge(std::uint32_t slot);
    std::uint64_t simulated_device_used();

    SegmentView view_;
    const worker::Device* cuda_;
    std::vector<Slot> slots_;
    std::map<std::uint32_t, CensusRecord> believable_;
    arbiter::Snapshot snapshot_;
    // The simulated device's sum, recomputed only after a record it depends on changed.
    bool device_used_stale_ = true;
    std::uint64_t device_used_ = 0;
};

}  // namespace comfy::supervisor
