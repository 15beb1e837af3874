// The simulated device's account, which the supervisor alone keeps: every allocation is
// decided against everyone's use, so the device is never overcommitted, whatever a
// participant asks or gives back; what it decides is published in the segment and its copy.
#include <catch2/catch.hpp>

#include "shared/message_payloads.hpp"
#include "supervisor/memory/simulated_device_use.hpp"
#include "tests/support/test_instance.hpp"

#include <limits>

using namespace comfy;
using comfy::supervisor::SimulatedDeviceUse;

namespace {

constexpr Bytes kDevice = 24 * kGiB;
constexpr Capacities kCaps{4, 8, 4};

// Relaxed: this thread wrote it.
Bytes published(const SegmentView& view) { return view.device().used_bytes.load(std::memory_order_relaxed); }

}  // namespace

TEST_CASE("the simulated device's account grants what fits, refuses the rest, and publishes its use") {
    auto segment = create_segment(test::test_instance("device"), kCaps, kDevice);
    const auto view = view_of(segment);
    const SegmentView copy(segment.published()->base(), kCaps);
    supervisor::SegmentWriter writes(view, copy);
    SimulatedDeviceUse device(kDevice, kCaps.participants, writes);

    CHECK(device.allocate(1, 16 * kGiB));
    CHECK(device.allocate(2, 8 * kGiB));
    CHECK_FALSE(device.allocate(3, 1));  // full: nobody overcommits it
    CHECK(device.used() == kDevice);
    CHECK(published(view) == kDevice);
    CHECK(published(copy) == kDevice);

    // Giving back more than it holds gives back what it holds, and no other slot's.
    device.release(2, 100 * kGiB);
    CHECK(device.used() == 16 * kGiB);
    CHECK(published(view) == 16 * kGiB);
    device.release(2, kGiB);
    CHECK(device.used() == 16 * kGiB);

    // An ask that no sum could hold is refused, never wrapped into a small one.
    CHECK_FALSE(device.allocate(3, std::numeric_limits<Bytes>::max()));
    CHECK_FALSE(device.allocate(3, kMaxBytes));
    CHECK(device.allocate(3, 8 * kGiB));

    // A life that ends holds nothing from then on.
    device.forget(1);
    CHECK(device.used() == 8 * kGiB);
    CHECK(published(copy) == 8 * kGiB);
    CHECK(device.allocate(0, 16 * kGiB));
    CHECK(device.used() == kDevice);
}
