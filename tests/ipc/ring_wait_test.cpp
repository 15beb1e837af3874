// Waiting on the ring: blocking and waking in both modes, time-outs, no system call
// while the consumer is awake, and no busy spinning while idle.
#include <catch2/catch.hpp>

#include "ipc/spsc_ring.hpp"
#include "tests/support/shared_block.hpp"

#include <ctime>
#include <thread>

using namespace comfy::ipc;
using namespace std::chrono_literals;

namespace {

struct Ring {
    explicit Ring(std::uint32_t slots) : capacity(slots), block(ring_bytes<std::uint64_t>(slots)) {
        ring_initialize<std::uint64_t>(block.get(), capacity);
    }
    RingPlace place() const { return ring_in_block<std::uint64_t>(block.get(), capacity); }
    std::uint32_t capacity;
    comfy::test::SharedBlock block;
};

std::chrono::nanoseconds thread_cpu_time() {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

}  // namespace

TEST_CASE("a blocked consumer wakes when a message arrives") {
    Ring ring(8);
    RingProducer<std::uint64_t> producer(ring.place(), ring.capacity);
    RingConsumer<std::uint64_t> consumer(ring.place(), ring.capacity);
    WaitResult result = WaitResult::timed_out;
    std::uint64_t value = 0;
    std::thread waiter([&] {
        result = consumer.wait(10s, 0ns);
        if (result == WaitResult::ready) consumer.try_pop(value);
    });
    std::this_thread::sleep_for(100ms);  // the waiter is asleep on the futex by now
    REQUIRE(producer.try_push(42) == PushResult::ok);
    waiter.join();
    CHECK(result == WaitResult::ready);
    CHECK(value == 42);
}

TEST_CASE("a wait on an empty ring times out") {
    Ring ring(8);
    RingConsumer<std::uint64_t> consumer(ring.place(), ring.capacity);
    CHECK(consumer.wait(50ms) == WaitResult::timed_out);
    CHECK(consumer.wait(0ns) == WaitResult::timed_out);
}

TEST_CASE("a wait returns at once when a message is already there") {
    Ring ring(8);
    RingProducer<std::uint64_t> producer(ring.place(), ring.capacity);
    RingConsumer<std::uint64_t> consumer(ring.place(), ring.capacity);
    REQUIRE(producer.try_push(7) == PushResult::ok);
    CHECK(consumer.wait(0ns) == WaitResult::ready);
    CHECK(consumer.wait(10s, 0ns) == WaitResult::ready);
}

TEST_CASE("the producer rings the doorbell only while the consumer is armed") {
    Ring ring(8);
    const EventFd doorbell;
    RingProducer<std::uint64_t> producer(ring.place(), ring.capacity, &doorbell);
    RingConsumer<std::uint64_t> consumer(ring.place(), ring.capacity);

    REQUIRE(producer.try_push(1) == PushResult::ok);
    CHECK_FALSE(doorbell.drain());  // awake consumer: no ring

    std::uint64_t value = 0;
    REQUIRE(consumer.try_pop(value) == PopResult::ok);
    REQUIRE(consumer.arm_doorbell() == PopResult::empty);
    REQUIRE(producer.try_push(2) == PushResult::ok);
    CHECK(doorbell.wait_readable(0));
    CHECK(doorbell.drain());
    consumer.disarm();

    REQUIRE(producer.try_push(3) == PushResult::ok);
    CHECK_FALSE(doorbell.drain());
}

TEST_CASE("arming the doorbell with a message waiting says so instead of sleeping") {
    Ring ring(8);
    RingProducer<std::uint64_t> producer(ring.place(), ring.capacity);
    RingConsumer<std::uint64_t> consumer(ring.place(), ring.capacity);
    REQUIRE(producer.try_push(5) == PushResult::ok);
    CHECK(consumer.arm_doorbell() == PopResult::ok);
    consumer.disarm();
}

TEST_CASE("a consumer waiting on a quiet ring uses almost no CPU") {
    Ring ring(8);
    RingConsumer<std::uint64_t> consumer(ring.place(), ring.capacity);
    std::chrono::nanoseconds used{};
    WaitResult result = WaitResult::ready;
    std::thread waiter([&] {
        const auto before = thread_cpu_time();
        result = consumer.wait(1s);  // default spin first, then the futex
        used = thread_cpu_time() - before;
    });
    waiter.join();
    CHECK(result == WaitResult::timed_out);
    // Spinning through the second would cost ~1 s; the bounded spin costs ~50 us.
    CHECK(used < 20ms);
}
