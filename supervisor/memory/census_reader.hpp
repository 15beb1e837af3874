#pragma once
// The participants' censuses as the supervisor's decisions read them, at a cost that
// follows the censuses that changed: every event needs the device's free figure and the
// asker's allocator figures, and with a thousand workers re-reading every census into a
// fresh map per event made the supervisor's CPU per spawn grow with the worker count.
//
// Each census lives in its participant's own region, mapped read-only here. It is kept as
// last read whole, with the seqlock sequence it was read at, and read again only when its
// sequence moved: when its participant is heard from (each message it sends: a
// participant writes its census before the messages that depend on it, and the ring's
// acquire makes that write visible), and at the heartbeat check and the host-memory
// decisions, which read every slot. An event costs one census read, its sender's, however
// many participants there are; a census written without a message after it is seen at the
// next heartbeat check (at most 250 ms later). The rules stay those of shared memory as
// input: a census is believed only when it carries the generation the supervisor runs in
// that slot and holds figures a machine can have; a corrupt or stale census costs only its
// own slot (its figures unknown). The simulated device's figures are the supervisor's own
// account of it (simulated_device_use.hpp).

#include "shared/participant_region.hpp"
#include "shared/records.hpp"
#include "shared/segment_layout.hpp"
#include "supervisor/arbiter/arbiter_io.hpp"
#include "supervisor/memory/simulated_device_use.hpp"
#include "worker/device.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace comfy::supervisor {

class CensusReader {
public:
    // `simulated`: the simulated device's account, or null for a real device, whose
    // figures come from `cuda`'s driver. All must outlive the reader.
    CensusReader(const SegmentView& view, const SimulatedDeviceUse* simulated, const worker::Device* cuda);
    // Each slot keeps its place in the reader's own maps: never copied.
    CensusReader(const CensusReader&) = delete;
    CensusReader& operator=(const CensusReader&) = delete;

    // Reads `census`, in the region of the life `generation` runs in `slot`, from now on:
    // only a census carrying that generation is believed. The region must stay mapped
    // until forget(slot).
    void watch(std::uint32_t slot, const CensusSlot& census, std::uint32_t generation);
    // Nothing runs in `slot` any more: its census is dropped and its device use is gone.
    void forget(std::uint32_t slot);

    // The participant in `slot` sent a message: catches up with its census.
    void heard_from(std::uint32_t slot);
    // Catches up with every census that changed (one atomic load a slot).
    void refresh();

    // The world as an event finds it: the device's figures and each believable census's
    // allocator figures, as last caught up with. Valid until the next call.
    const arbiter::Snapshot& snapshot(std::uint64_t now_ms);

    // The believable censuses as of the last refresh, by slot.
    const std::map<std::uint32_t, CensusRecord>& believable() const noexcept { return believable_; }

    // What the last refresh found in `slot`: the census as read, its judgement and the
    // heartbeat count, as the supervisor publishes it for comfyctl.
    CensusReport report(std::uint32_t slot) const;
    // The slots whose census changed since the last call, for the supervisor to republish.
    std::vector<std::uint32_t> take_changed();

private:
    struct Slot {
        const CensusSlot* census = nullptr;  // null while nothing runs in the slot
        std::uint32_t generation = 0;
        CensusRecord value{};
        // The sequence the value was read at; an odd one (the start, or a read that found
        // the census mid-write) never matches, so it is read again.
        std::uint32_t sequence = 1;
        CensusStatus status = CensusStatus::unread;
        // Where a believed census stands in believable_ and snapshot_ (map iterators stay
        // valid until their own erase), so that a change costs no lookup.
        std::optional<std::map<std::uint32_t, CensusRecord>::iterator> believed;
        std::optional<std::map<std::uint32_t, arbiter::ParticipantFigures>::iterator> figures;
    };

    // Re-reads the slot's census if its sequence moved; true when anything changed.
    bool catch_up(Slot& s);
    // Puts the slot's census into, or takes it out of, the believable set and the figures.
    void judge(std::uint32_t slot);

    const SimulatedDeviceUse* simulated_;
    const worker::Device* cuda_;
    std::vector<Slot> slots_;
    std::map<std::uint32_t, CensusRecord> believable_;
    std::vector<std::uint32_t> changed_;
    arbiter::Snapshot snapshot_;
};

}  // namespace comfy::supervisor
