// The ring across two real processes, as the supervisor and a worker hold it: the parent
// creates the segment and the participant's region (mapped read-only here), the child maps
// the segment read-only and its region writable from the inherited descriptors.
#include <catch2/catch.hpp>

#include "ipc/sealed_region.hpp"
#include "shared/message_codec.hpp"
#include "shared/participant_region.hpp"
#include "shared/segment_layout.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/test_instance.hpp"

#include <unistd.h>

#include <thread>

using namespace comfy;
using comfy::test::ChildProcess;

namespace {

MessageSlot numbered(std::uint64_t n) { return encode(CastEpochBoundary{n}, 1, ~n); }

// Slot 0's region, as the supervisor makes it: fresh, and read-only in this process.
ipc::SealedRegion participant_region(const SegmentView& view) {
    return ipc::SealedRegion::create("test-slot-0", ParticipantRegionMap::compute(view.capacities().ring_slots).total_bytes,
                                     ipc::Access::read_only);
}

// The participant's side of the same: the segment read-only, its region writable.
struct ChildSide {
    ChildSide(const ipc::SharedSegment& parent_segment, const ipc::SealedRegion& parent_region)
        : segment(adopt_segment(::dup(parent_segment.read_only_fd()))),
          view(view_of(segment)),
          region(ipc::SealedRegion::adopt(::dup(parent_region.fd()), "test", parent_region.size(),
                                          ipc::Access::read_write)),
          parts(region.base(), view.capacities().ring_slots) {}
    ipc::SharedSegment segment;
    SegmentView view;
    ipc::SealedRegion region;
    ParticipantRegionView parts;
};

// The child's side: push `count` numbered messages on slot 0's ring.
int produce(const ipc::SharedSegment& parent_segment, const ipc::SealedRegion& parent_region, std::uint64_t count) {
    ChildSide child(parent_segment, parent_region);
    ipc::RingProducer<MessageSlot> producer(from_participant_ring(child.view, child.parts, 0),
                                            child.view.capacities().ring_slots);
    for (std::uint64_t n = 0; n < count;) {
        const auto state = producer.try_push(numbered(n));
        if (state == ipc::PushResult::corrupt) return 3;
        if (state == ipc::PushResult::ok) {
            ++n;
        } else {
            std::this_thread::yield();  // full: let the consumer run if it shares our core
        }
    }
    return 0;
}

}  // namespace

TEST_CASE("ten million messages cross two processes in order, none lost or duplicated") {
    constexpr std::uint64_t kCount = 10'000'000;
    const auto instance = test::test_instance("ring");
    auto segment = create_segment(instance, Capacities{4, 16, 1024});
    const auto view = view_of(segment);
    const auto region = participant_region(view);
    const ParticipantRegionView parts(region.base(), view.capacities().ring_slots);
    ipc::RingConsumer<MessageSlot> consumer(from_participant_ring(view, parts, 0), view.capacities().ring_slots);

    ChildProcess child([&] { return produce(segment, region, kCount); });
    std::uint64_t expected = 0;
    std::uint64_t wrong = 0;
    MessageSlot slot{};
    while (expected < kCount) {
        const auto state = consumer.wait(std::chrono::seconds(10));
        REQUIRE(state == ipc::WaitResult::ready);
        while (consumer.try_pop(slot) == ipc::PopResult::ok) {
            const auto* payload = reinterpret_cast<const CastEpochBoundary*>(slot.payload.data());
            if (payload->prompt_epoch != expected || slot.header.correlation != ~expected) ++wrong;
            ++expected;
        }
    }
    CHECK(child.wait() == 0);
    CHECK(wrong == 0);
    CHECK(expected == kCount);
    CHECK(consumer.try_pop(slot) == ipc::PopResult::empty);
}

TEST_CASE("a consumer in another process sleeps on the futex and wakes for each message") {
    const auto instance = test::test_instance("ring");
    auto segment = create_segment(instance, Capacities{4, 16, 8});
    const auto view = view_of(segment);
    const auto region = participant_region(view);
    const ParticipantRegionView parts(region.base(), view.capacities().ring_slots);
    ipc::RingProducer<MessageSlot> to_child(to_participant_ring(view, parts, 0), view.capacities().ring_slots);
    ipc::RingConsumer<MessageSlot> from_child(from_participant_ring(view, parts, 0), view.capacities().ring_slots);

    // The child echoes each message back; it waits with no spin so it really sleeps, on a
    // futex word in the parent's segment, which it maps read-only (and the parent sleeps on
    // one in the child's region, which the parent maps read-only).
    ChildProcess child([&] {
        ChildSide side(segment, region);
        const auto ring_slots = side.view.capacities().ring_slots;
        ipc::RingConsumer<MessageSlot> in(to_participant_ring(side.view, side.parts, 0), ring_slots);
        ipc::RingProducer<MessageSlot> out(from_participant_ring(side.view, side.parts, 0), ring_slots);
        MessageSlot slot{};
        for (int received = 0; received < 50;) {
            if (in.wait(std::chrono::seconds(10), std::chrono::nanoseconds(0)) != ipc::WaitResult::ready) return 2;
            while (in.try_pop(slot) == ipc::PopResult::ok) {
                if (out.try_push(slot) != ipc::PushResult::ok) return 3;
                ++received;
            }
        }
        return 0;
    });
    MessageSlot echo{};
    for (std::uint64_t n = 0; n < 50; ++n) {
        REQUIRE(to_child.try_push(numbered(n)) == ipc::PushResult::ok);
        REQUIRE(from_child.wait(std::chrono::seconds(10), std::chrono::nanoseconds(0)) == ipc::WaitResult::ready);
        REQUIRE(from_child.try_pop(echo) == ipc::PopResult::ok);
        CHECK(echo.header.correlation == ~n);
    }
    CHECK(child.wait() == 0);
}

TEST_CASE("a consumer in another process is woken through the eventfd doorbell") {
    const auto instance = test::test_instance("ring");
    auto segment = create_segment(instance, Capacities{4, 16, 8});
    const auto view = view_of(segment);
    const auto region = participant_region(view);
    const ParticipantRegionView parts(region.base(), view.capacities().ring_slots);
    const ipc::EventFd doorbell;  // inherited by the child across fork
    ipc::RingConsumer<MessageSlot> consumer(from_participant_ring(view, parts, 0), view.capacities().ring_slots);

    ChildProcess child([&] {
        ChildSide side(segment, region);
        ipc::RingProducer<MessageSlot> producer(from_participant_ring(side.view, side.parts, 0),
                                                side.view.capacities().ring_slots, &doorbell);
        for (std::uint64_t n = 0; n < 20; ++n) {
            ::usleep(2000);  // let the parent go back to sleep between messages
            if (producer.try_push(numbered(n)) != ipc::PushResult::ok) return 3;
        }
        return 0;
    });
    std::uint64_t received = 0;
    MessageSlot slot{};
    while (received < 20) {
        if (consumer.arm_doorbell() == ipc::PopResult::empty) {
            REQUIRE(doorbell.wait_readable(10'000));
        }
        consumer.disarm();
        doorbell.drain();
        while (consumer.try_pop(slot) == ipc::PopResult::ok) CHECK(slot.header.correlation == ~received++);
    }
    CHECK(child.wait() == 0);
}
