#include "worker/participant_memory.hpp"

#include <new>
#include <stdexcept>

namespace comfy::worker {

namespace {

// The segment's view, once `slot` is known to be one of its participant slots.
SegmentView view_for_slot(const ipc::SharedSegment& segment, std::uint32_t slot) {
    SegmentView view = view_of(segment);
    if (slot >= view.capacities().participants) {
        throw std::runtime_error("slot " + std::to_string(slot) + " is outside the segment's " +
                                 std::to_string(view.capacities().participants) + " participant slots");
    }
    return view;
}

}  // namespace

ParticipantMemory::ParticipantMemory(const WorkerEnvironment& environment)
    : segment(adopt_segment(environment.segment_fd)),
      view(view_for_slot(segment, environment.slot)),
      region(ipc::SealedRegion::adopt(environment.region_fd, "of slot " + std::to_string(environment.slot),
                                      ParticipantRegionMap::compute(view.capacities().ring_slots).total_bytes,
                                      ipc::Access::read_write)),
      own(region.base(), view.capacities().ring_slots),
      slot(environment.slot) {
    // The region is fresh (zero-filled) for every life: nothing is taken over from an
    // earlier one, and its objects are constructed here, before anything uses them.
    new (&own.census()) CensusSlot{};
    ipc::ring_initialize_consumer_side(own.inbound_consumer_side());
    ipc::ring_initialize_producer_side<MessageSlot>(own.outbound_producer_side(), view.capacities().ring_slots);
}

}  // namespace comfy::worker
