#include "shared/segment_layout.hpp"

#include "shared/message_payloads.hpp"

#include <new>

namespace comfy {

namespace {

constexpr std::size_t align_up(std::size_t value, std::size_t alignment) {
    return (value + alignment - 1) / alignment * alignment;
}

constexpr std::size_t kLayoutHeaderOffset = align_up(sizeof(ipc::SegmentHeader), ipc::kCacheLine);

LayoutHeader* layout_header(std::byte* base) { return reinterpret_cast<LayoutHeader*>(base + kLayoutHeaderOffset); }

void initialise(std::byte* base, const Capacities& caps, const RegionMap& map, std::uint64_t device_total_bytes) {
    auto* header = new (base + kLayoutHeaderOffset) LayoutHeader{};
    header->participants = caps.participants;
    header->ledger_entries = caps.ledger_entries;
    header->ring_slots = caps.ring_slots;
    header->message_slot_bytes = sizeof(MessageSlot);
    header->device_offset = map.device_offset;
    header->ledger_generation_offset = map.ledger_generation_offset;
    header->participants_offset = map.participants_offset;
    header->ledger_offset = map.ledger_offset;
    header->rings_offset = map.rings_offset;
    header->device_total_bytes = device_total_bytes;
    // The mapping is fresh and zero-filled; construct the objects that live in it.
    new (base + map.device_offset) DeviceFigures{};
    new (base + map.ledger_generation_offset) LedgerGeneration{};
    for (std::uint32_t i = 0; i < caps.participants; ++i) {
        new (base + map.participants_offset + i * sizeof(ParticipantSlot)) ParticipantSlot{};
        std::byte* halves = base + map.rings_offset + i * map.ring_halves_bytes;
        ipc::ring_initialize_producer_side<MessageSlot>(halves, caps.ring_slots);
        ipc::ring_initialize_consumer_side(halves + map.consumer_half_offset);
    }
    for (std::uint32_t i = 0; i < caps.ledger_entries; ++i) {
        new (base + map.ledger_offset + i * sizeof(LedgerSlot)) LedgerSlot{};
    }
}

template <class V>
void expect_layout(const std::string& name, const char* field, V found, V expected) {
    if (found != expected) {
        throw ipc::SegmentError("segment " + name + ": layout field " + field + " is " + std::to_string(found) +
                                ", expected " + std::to_string(expected) +
                                "; the segment is damaged or from another build: restart the supervisor");
    }
}

}  // namespace

std::string Capacities::validate() const {
    if (participants < 1 || participants > 1024) {
        return "participants is " + std::to_string(participants) + ", expected 1 to 1024";
    }
    if (ledger_entries < 1 || ledger_entries > (1u << 20)) {
        return "ledger_entries is " + std::to_string(ledger_entries) + ", expected 1 to 1048576";
    }
    if (!ipc::valid_ring_capacity(ring_slots) || ring_slots > 65536) {
        return "ring_slots is " + std::to_string(ring_slots) + ", expected a power of two from 2 to 65536";
    }
    return {};
}

RegionMap RegionMap::compute(const Capacities& caps) {
    RegionMap map{};
    map.device_offset = align_up(kLayoutHeaderOffset + sizeof(LayoutHeader), ipc::kCacheLine);
    map.ledger_generation_offset = align_up(map.device_offset + sizeof(DeviceFigures), ipc::kCacheLine);
    map.participants_offset = align_up(map.ledger_generation_offset + sizeof(LedgerGeneration), ipc::kCacheLine);
    map.ledger_offset = align_up(map.participants_offset + caps.participants * sizeof(ParticipantSlot), ipc::kCacheLine);
    map.rings_offset = align_up(map.ledger_offset + caps.ledger_entries * sizeof(LedgerSlot), ipc::kCacheLine);
    map.consumer_half_offset = align_up(ipc::ring_producer_bytes<MessageSlot>(caps.ring_slots), ipc::kCacheLine);
    map.ring_halves_bytes = align_up(map.consumer_half_offset + ipc::kRingConsumerBytes, ipc::kCacheLine);
    map.total_bytes = map.rings_offset + std::size_t{caps.participants} * map.ring_halves_bytes;
    return map;
}

SegmentView::SegmentView(std::byte* base, const Capacities& capacities)
    : base_(base), capacities_(capacities), map_(RegionMap::compute(capacities)) {}

std::uint64_t SegmentView::device_total_bytes() const noexcept {
    return layout_header(base_)->device_total_bytes;
}

DeviceFigures& SegmentView::device() const noexcept {
    return *reinterpret_cast<DeviceFigures*>(base_ + map_.device_offset);
}

LedgerGeneration& SegmentView::ledger_generation() const noexcept {
    return *reinterpret_cast<LedgerGeneration*>(base_ + map_.ledger_generation_offset);
}

ParticipantSlot& SegmentView::participant(std::uint32_t slot) const noexcept {
    return *reinterpret_cast<ParticipantSlot*>(base_ + map_.participants_offset + slot * sizeof(ParticipantSlot));
}

LedgerSlot& SegmentView::ledger(std::uint32_t index) const noexcept {
    return *reinterpret_cast<LedgerSlot*>(base_ + map_.ledger_offset + index * sizeof(LedgerSlot));
}

void* SegmentView::to_participant_producer_side(std::uint32_t slot) const noexcept {
    return base_ + map_.rings_offset + std::size_t{slot} * map_.ring_halves_bytes;
}

void* SegmentView::from_participant_consumer_side(std::uint32_t slot) const noexcept {
    return base_ + map_.rings_offset + std::size_t{slot} * map_.ring_halves_bytes + map_.consumer_half_offset;
}

ipc::SharedSegment create_segment(const std::string& instance, const Capacities& capacities,
                                  std::uint64_t device_total_bytes) {
    const std::string name = ipc::segment_name(instance);
    if (const auto problem = capacities.validate(); !problem.empty()) {
        throw ipc::SegmentError("segment " + name + ": capacity " + problem);
    }
    const RegionMap map = RegionMap::compute(capacities);
    return ipc::SharedSegment::create(name, map.total_bytes, kLayoutVersion,
                                      [&](std::byte* base, std::size_t) { initialise(base, capacities, map, device_total_bytes); });
}

ipc::SharedSegment attach_segment(const std::string& instance) {
    auto segment = ipc::SharedSegment::attach(ipc::segment_name(instance), kLayoutVersion);
    view_of(segment);  // validates the layout header before anyone uses the segment
    return segment;
}

ipc::SharedSegment adopt_segment(int fd) {
    auto segment = ipc::SharedSegment::adopt(fd, kLayoutVersion);
    view_of(segment);
    return segment;
}

SegmentView view_of(const ipc::SharedSegment& segment) {
    const std::string& name = segment.name();
    if (segment.size() < kLayoutHeaderOffset + sizeof(LayoutHeader)) {
        throw ipc::SegmentError("segment " + name + ": too small for its layout header; restart the supervisor");
    }
    const LayoutHeader header = *layout_header(segment.base());
    const Capacities caps{header.participants, header.ledger_entries, header.ring_slots};
    if (const auto problem = caps.validate(); !problem.empty()) {
        throw ipc::SegmentError("segment " + name + ": layout field " + problem + "; restart the supervisor");
    }
    const RegionMap map = RegionMap::compute(caps);
    expect_layout(name, "message_slot_bytes", std::size_t{header.message_slot_bytes}, sizeof(MessageSlot));
    expect_layout(name, "device_offset", std::size_t{header.device_offset}, map.device_offset);
    expect_layout(name, "ledger_generation_offset", std::size_t{header.ledger_generation_offset},
                  map.ledger_generation_offset);
    expect_layout(name, "participants_offset", std::size_t{header.participants_offset}, map.participants_offset);
    expect_layout(name, "ledger_offset", std::size_t{header.ledger_offset}, map.ledger_offset);
    expect_layout(name, "rings_offset", std::size_t{header.rings_offset}, map.rings_offset);
    expect_layout(name, "total_bytes", segment.size(), map.total_bytes);
    return SegmentView(segment.base(), caps);
}

bool is_valid_ledger_record(const LedgerRecord& record, std::uint32_t participants) noexcept {
    const bool loaded_valid = record.loaded_bytes == kUnknownBytes || record.loaded_bytes <= record.total_bytes;
    return record.owner_slot < participants && record.total_bytes <= kMaxBytes && loaded_valid &&
           record.currently_used <= 1 && record.dynamic <= 1 && is_valid_name(record.name);
}

}  // namespace comfy
