#pragma once
// A participant's own region: everything it writes, and nothing else. The supervisor
// creates it anew (zero-filled) for every life of a slot as a sealed memfd, maps it
// read-only, and hands its descriptor to that participant alone, which maps it writable.
// No other participant can map it, so a stray write by one participant reaches nobody
// else's memory, and one life's garbage never survives into the next.
//
// It holds the participant's census (through a seqlock) and heartbeat, the producer half
// of the ring it writes to the supervisor, and the consumer half of the ring it reads.

#include "ipc/seqlock.hpp"
#include "ipc/spsc_ring.hpp"
#include "shared/message_header.hpp"
#include "shared/records.hpp"
#include "shared/segment_layout.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace comfy {

struct alignas(ipc::kCacheLine) CensusSlot {
    ipc::Seqlock<CensusRecord> census;
    // Written by the participant's heartbeat thread only; read by the supervisor.
    alignas(ipc::kCacheLine) std::atomic<std::uint64_t> heartbeat;
};

// Offsets within a region, from the ring capacity alone (the segment's layout header
// gives it), so both sides compute the same map.
struct ParticipantRegionMap {
    std::size_t census_offset;
    std::size_t inbound_consumer_offset;   // consumer half of the supervisor's ring to it
    std::size_t outbound_producer_offset;  // producer half of its ring to the supervisor
    std::size_t total_bytes;

    static ParticipantRegionMap compute(std::uint32_t ring_slots);
};

class ParticipantRegionView {
public:
    ParticipantRegionView() = default;
    ParticipantRegionView(std::byte* base, std::uint32_t ring_slots);

    CensusSlot& census() const noexcept;
    void* inbound_consumer_side() const noexcept;
    void* outbound_producer_side() const noexcept;

private:
    std::byte* base_ = nullptr;
    ParticipantRegionMap map_{};
};

// The two rings of participant `slot`, their halves joined from both memories.
ipc::RingPlace to_participant_ring(const SegmentView& segment, const ParticipantRegionView& region,
                                   std::uint32_t slot) noexcept;
ipc::RingPlace from_participant_ring(const SegmentView& segment, const ParticipantRegionView& region,
                                     std::uint32_t slot) noexcept;

}  // namespace comfy
