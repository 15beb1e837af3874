#include "shared/participant_region.hpp"

namespace comfy {

namespace {
constexpr std::size_t align_up(std::size_t value) {
    return (value + ipc::kCacheLine - 1) / ipc::kCacheLine * ipc::kCacheLine;
}
}  // namespace

ParticipantRegionMap ParticipantRegionMap::compute(std::uint32_t ring_slots) {
    ParticipantRegionMap map{};
    map.census_offset = 0;
    map.inbound_consumer_offset = align_up(sizeof(CensusSlot));
    map.outbound_producer_offset = align_up(map.inbound_consumer_offset + ipc::kRingConsumerBytes);
    map.total_bytes = align_up(map.outbound_producer_offset + ipc::ring_producer_bytes<MessageSlot>(ring_slots));
    return map;
}

ParticipantRegionView::ParticipantRegionView(std::byte* base, std::uint32_t ring_slots)
    : base_(base), map_(ParticipantRegionMap::compute(ring_slots)) {}

CensusSlot& ParticipantRegionView::census() const noexcept {
    return *reinterpret_cast<CensusSlot*>(base_ + map_.census_offset);
}

void* ParticipantRegionView::inbound_consumer_side() const noexcept { return base_ + map_.inbound_consumer_offset; }

void* ParticipantRegionView::outbound_producer_side() const noexcept { return base_ + map_.outbound_producer_offset; }

ipc::RingPlace to_participant_ring(const SegmentView& segment, const ParticipantRegionView& region,
                                   std::uint32_t slot) noexcept {
    return {segment.to_participant_producer_side(slot), region.inbound_consumer_side()};
}

ipc::RingPlace from_participant_ring(const SegmentView& segment, const ParticipantRegionView& region,
                                     std::uint32_t slot) noexcept {
    return {region.outbound_producer_side(), segment.from_participant_consumer_side(slot)};
}

}  // namespace comfy
