#pragma once
// The layout of the supervisor's segment: a fixed header, the simulated device's figures,
// the ledger's generation, then fixed-capacity tables (participants, ledger) and the supervisor's half of each
// participant's two rings. Everything is sized at creation from one Capacities value;
// nothing grows later.
//
// The supervisor alone writes this segment; every other process maps it read-only. What
// a participant writes (its census, its heartbeat, its outgoing ring, its consumer index
// of the incoming one) is in a region of its own: shared/participant_region.hpp. Its
// published copy (ipc/published_copy.hpp) has the same layout, for readers by name.

#include "ipc/seqlock.hpp"
#include "ipc/shm_segment.hpp"
#include "ipc/spsc_ring.hpp"
#include "shared/message_header.hpp"
#include "shared/records.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace comfy {

// Bump on any change to the bytes of the segment or of a message. 4: the ledger's
// generation (LedgerGeneration). 5: a participant's last node by name (ParticipantRecord).
// 6: a model's name in model_registered and the ledger. 7: since when a participant is
// busy, and whether in a callback (ParticipantRecord; node_started's activity). 8: a
// participant's node classes (ready's count) and its note (ParticipantRecord).
inline constexpr std::uint32_t kLayoutVersion = 8;

struct Capacities {
    std::uint32_t participants = 64;
    std::uint32_t ledger_entries = 4096;
    std::uint32_t ring_slots = 256;  // per ring; a power of two

    // Empty when usable; otherwise one line naming the bad value and the allowed range.
    std::string validate() const;
};

// The layout-specific header, right after ipc::SegmentHeader. Written once by the
// creator before the segment is published; read-only afterwards.
struct LayoutHeader {
    std::uint32_t participants;
    std::uint32_t ledger_entries;
    std::uint32_t ring_slots;
    std::uint32_t message_slot_bytes;
    std::uint64_t device_offset;
    std::uint64_t ledger_generation_offset;
    std::uint64_t participants_offset;
    std::uint64_t ledger_offset;
    std::uint64_t rings_offset;
    std::uint64_t device_total_bytes;  // the simulated device's size; 0 for a real device
};

// The simulated device's figures. The supervisor decides every allocation on the
// simulated device (supervisor/memory/simulated_device_use.hpp) and writes what it decided
// here; every participant reads it for the device's free memory. 0 for a real device,
// whose driver has the figures.
struct alignas(ipc::kCacheLine) DeviceFigures {
    // Bytes allocated by every live participant together; never above device_total_bytes.
    std::atomic<std::uint64_t> used_bytes;
};

// How many times the supervisor has changed the ledger's rows, so that a participant that
// reads the ledger (to mirror it, as ComfyUI's host does with its stand-ins) can tell at
// the cost of one load that nothing changed since it last read, and skip the read of up
// to a million rows and their sort. The supervisor, the segment's one writer, adds one
// after each batch of row writes, with release order; a reader loads it with acquire
// order before it reads any row, so every row written before the count it loaded is what
// it reads (or newer). A count that moved while it read only makes it read again next
// time. A reader trusts nothing else of it: the count is only compared for equality.
struct alignas(ipc::kCacheLine) LedgerGeneration {
    std::atomic<std::uint64_t> value;
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "the ledger generation is shared between processes");

struct alignas(ipc::kCacheLine) ParticipantSlot {
    ipc::Seqlock<ParticipantRecord> record;
    // The participant's census as the supervisor last read and judged it, for readers
    // that cannot map the participant's own region (comfyctl).
    alignas(ipc::kCacheLine) ipc::Seqlock<CensusReport> census;
};

struct alignas(ipc::kCacheLine) LedgerSlot {
    ipc::Seqlock<LedgerRecord> entry;
};

// Whether a ledger row read from the segment holds figures and a name the supervisor could
// have written for a segment of `participants` slots (a used row: owner_generation is not 0).
bool is_valid_ledger_record(const LedgerRecord& record, std::uint32_t participants) noexcept;

// Offsets of every region, derived from the capacities alone, so creator and attacher
// compute the same map and can compare it with what the header claims.
struct RegionMap {
    std::size_t device_offset;
    std::size_t ledger_generation_offset;
    std::size_t participants_offset;
    std::size_t ledger_offset;
    std::size_t rings_offset;
    // Per participant, the supervisor's halves: the producer half of the ring to the
    // participant, then the consumer half of the ring from it.
    std::size_t ring_halves_bytes;
    std::size_t consumer_half_offset;  // within one participant's halves
    std::size_t total_bytes;

    static RegionMap compute(const Capacities& capacities);
};

// Typed access to a mapped segment. Construct it only through create/attach below,
// which validate the header; the view itself then trusts the capacities it holds.
class SegmentView {
public:
    SegmentView() = default;
    SegmentView(std::byte* base, const Capacities& capacities);

    const Capacities& capacities() const noexcept { return capacities_; }
    // The simulated device's total bytes (0 when the device is real), from the header.
    std::uint64_t device_total_bytes() const noexcept;
    DeviceFigures& device() const noexcept;
    LedgerGeneration& ledger_generation() const noexcept;
    ParticipantSlot& participant(std::uint32_t slot) const noexcept;
    LedgerSlot& ledger(std::uint32_t index) const noexcept;
    // The producer half of the ring the supervisor writes and participant `slot` reads.
    void* to_participant_producer_side(std::uint32_t slot) const noexcept;
    // The consumer half of the ring participant `slot` writes and the supervisor reads.
    void* from_participant_consumer_side(std::uint32_t slot) const noexcept;

private:
    std::byte* base_ = nullptr;
    Capacities capacities_{};
    RegionMap map_{};
};

// Creates the segment of `instance` with empty tables and rings (supervisor only).
// `device_total_bytes` is the simulated device's size, or 0 for a real device.
ipc::SharedSegment create_segment(const std::string& instance, const Capacities& capacities,
                                  std::uint64_t device_total_bytes = 0);

// Attaches read-only to the segment of `instance`, checking the header and the layout.
ipc::SharedSegment attach_segment(const std::string& instance);

// The same for the read-only descriptor the supervisor handed to a participant.
ipc::SharedSegment adopt_segment(int fd);

// The view of a segment that create_segment or attach_segment returned. Throws
// ipc::SegmentError when the layout header does not match the segment.
SegmentView view_of(const ipc::SharedSegment& segment);

}  // namespace comfy
