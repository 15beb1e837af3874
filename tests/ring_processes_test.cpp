// The ring across two real processes, through the supervisor's segment: the child
// attaches by name as a worker would.
#include <catch2/catch.hpp>

#include "shared/message_codec.hpp"
#include "shared/segment_layout.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/test_instance.hpp"

#include <unistd.h>

#include <thread>

using namespace comfy;
using comfy::test::ChildProcess;

namespace {

MessageSlot numbered(std::uint64_t n) { return encode(CastEpochBoundary{n}, 1, ~n); }

// The child's side: attach by name, then push `count` numbered messages on slot 0's ring.
int produce(const std::string& instance, std::uint64_t count) {
    auto segment = attach_segment(instance);
    const auto view = view_of(segment);
    ipc::RingProducer<MessageSlot> producer(view.from_participant_ring(0), view.capacities().ring_slots);
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
    ipc::RingConsumer<MessageSlot> consumer(view.from_participant_ring(0), view.capacities().ring_slots);

    ChildProcess child([&] { return produce(instance, kCount); });
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
    ipc::RingProducer<MessageSlot> to_child(view.to_participant_ring(0), view.capacities().ring_slots);
    ipc::RingConsumer<MessageSlot> from_child(view.from_participant_ring(0), view.capacities().ring_slots);

    // The child echoes each message back; it waits with no spin so it really sleeps.
    ChildProcess child([&] {
        auto attached = attach_segment(instance);
        const auto v = view_of(attached);
        ipc::RingConsumer<MessageSlot> in(v.to_participant_ring(0), v.capacities().ring_slots);
        ipc::RingProducer<MessageSlot> out(v.from_participant_ring(0), v.capacities().ring_slots);
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
    const ipc::EventFd doorbell;  // inherited by the child across fork
    ipc::RingConsumer<MessageSlot> consumer(view.from_participant_ring(0), view.capacities().ring_slots);

    ChildProcess child([&] {
        auto attached = attach_segment(instance);
        const auto v = view_of(attached);
        ipc::RingProducer<MessageSlot> producer(v.from_participant_ring(0), v.capacities().ring_slots, &doorbell);
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
