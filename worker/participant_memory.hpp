#pragma once
// The shared memory a participant maps, all from the descriptors the supervisor handed
// down: the supervisor's segment read-only, its own region writable (fresh for this life,
// its parts constructed here by their one writer), and, for the simulated device, the
// device table writable. Nothing else: no other participant's region is reachable.

#include "ipc/sealed_region.hpp"
#include "ipc/shm_segment.hpp"
#include "shared/device_accounting.hpp"
#include "shared/participant_region.hpp"
#include "shared/segment_layout.hpp"
#include "worker/worker_environment.hpp"

#include <optional>

namespace comfy::worker {

struct ParticipantMemory {
    // Throws std::runtime_error (ipc::SegmentError) with one line when a descriptor is
    // missing or is not what the supervisor makes.
    explicit ParticipantMemory(const WorkerEnvironment& environment);

    ipc::SharedSegment segment;  // read-only
    SegmentView view;
    ipc::SealedRegion region;    // this life's own, writable
    ParticipantRegionView own;
    std::optional<ipc::SealedRegion> device_table_region;  // the simulated device's, writable
    DeviceTable device_table;                               // empty for a real device

    ipc::RingPlace inbound() const noexcept { return to_participant_ring(view, own, slot); }
    ipc::RingPlace outbound() const noexcept { return from_participant_ring(view, own, slot); }

private:
    std::uint32_t slot;
};

}  // namespace comfy::worker
