#pragma once
// The shared memory a participant maps, all from the descriptors the supervisor handed
// down: the supervisor's segment read-only (the simulated device's figures in it), and its
// own region writable (fresh for this life, its parts constructed here by their one
// writer). Nothing else: no other participant's region is reachable.

#include "ipc/sealed_region.hpp"
#include "ipc/shm_segment.hpp"
#include "shared/participant_region.hpp"
#include "shared/segment_layout.hpp"
#include "worker/worker_environment.hpp"

namespace comfy::worker {

struct ParticipantMemory {
    // Throws std::runtime_error (ipc::SegmentError) with one line when a descriptor is
    // missing or is not what the supervisor makes.
    explicit ParticipantMemory(const WorkerEnvironment& environment);

    ipc::SharedSegment segment;  // read-only
    SegmentView view;
    ipc::SealedRegion region;    // this life's own, writable
    ParticipantRegionView own;

    ipc::RingPlace inbound() const noexcept { return to_participant_ring(view, own, slot); }
    ipc::RingPlace outbound() const noexcept { return from_participant_ring(view, own, slot); }

private:
    std::uint32_t slot;
};

}  // namespace comfy::worker
