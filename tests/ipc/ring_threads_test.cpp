// The ring under two threads of one process: order, back-pressure, wrap-around, and
// refusal to follow indices a peer has corrupted.
#include <catch2/catch.hpp>

#include "ipc/spsc_ring.hpp"
#include "tests/support/shared_block.hpp"

#include <thread>

using namespace comfy::ipc;

namespace {

struct Numbered {
    std::uint64_t sequence;
    std::uint64_t check;  // ~sequence, to notice a slot copied half-old
    std::uint8_t filler[48];
};
static_assert(sizeof(Numbered) == 64);

Numbered numbered(std::uint64_t n) { return Numbered{n, ~n, {}}; }

struct Ring {
    explicit Ring(std::uint32_t slots) : capacity(slots), block(ring_bytes<Numbered>(slots)) {
        ring_initialize<Numbered>(block.get(), capacity);
    }
    RingPlace place() const { return ring_in_block<Numbered>(block.get(), capacity); }
    RingProducerSide& producer_side() const { return *static_cast<RingProducerSide*>(place().producer_side); }
    RingConsumerSide& consumer_side() const { return *static_cast<RingConsumerSide*>(place().consumer_side); }
    std::uint32_t capacity;
    comfy::test::SharedBlock block;
};

}  // namespace

TEST_CASE("ten million messages cross two threads in order, none lost or duplicated") {
    constexpr std::uint64_t kCount = 10'000'000;
    Ring ring(1024);
    RingProducer<Numbered> producer(ring.place(), ring.capacity);
    RingConsumer<Numbered> consumer(ring.place(), ring.capacity);

    // On a full or empty ring each side yields or sleeps: the machine may have fewer
    // free cores than spinning threads, and spinning against a descheduled peer crawls.
    std::thread sender([&] {
        for (std::uint64_t n = 0; n < kCount;) {
            if (producer.try_push(numbered(n)) == PushResult::ok) {
                ++n;
            } else {
                std::this_thread::yield();
            }
        }
    });
    std::uint64_t expected = 0;
    std::uint64_t out_of_order = 0;
    Numbered message{};
    while (expected < kCount) {
        const auto state = consumer.try_pop(message);
        if (state == PopResult::empty) {
            REQUIRE(consumer.wait(std::chrono::seconds(10)) == WaitResult::ready);
            continue;
        }
        REQUIRE(state == PopResult::ok);
        if (message.sequence != expected || message.check != ~expected) ++out_of_order;
        ++expected;
    }
    sender.join();
    CHECK(out_of_order == 0);
    CHECK(consumer.try_pop(message) == PopResult::empty);
}

TEST_CASE("a full ring pushes back and loses nothing") {
    Ring ring(8);
    RingProducer<Numbered> producer(ring.place(), ring.capacity);
    RingConsumer<Numbered> consumer(ring.place(), ring.capacity);
    for (std::uint64_t n = 0; n < 8; ++n) REQUIRE(producer.try_push(numbered(n)) == PushResult::ok);
    CHECK(producer.try_push(numbered(8)) == PushResult::full);
    CHECK(producer.try_push(numbered(8)) == PushResult::full);

    Numbered message{};
    REQUIRE(consumer.try_pop(message) == PopResult::ok);
    CHECK(message.sequence == 0);
    REQUIRE(producer.try_push(numbered(8)) == PushResult::ok);
    CHECK(producer.try_push(numbered(9)) == PushResult::full);
    for (std::uint64_t n = 1; n <= 8; ++n) {
        REQUIRE(consumer.try_pop(message) == PopResult::ok);
        CHECK(message.sequence == n);
    }
    CHECK(consumer.try_pop(message) == PopResult::empty);
}

TEST_CASE("indices wrap around the ring many times") {
    Ring ring(4);
    RingProducer<Numbered> producer(ring.place(), ring.capacity);
    RingConsumer<Numbered> consumer(ring.place(), ring.capacity);
    std::uint64_t pushed = 0;
    std::uint64_t popped = 0;
    Numbered message{};
    for (int round = 0; round < 5000; ++round) {
        const int batch = 1 + round % 4;  // 1..4 messages, so the slots shift every round
        for (int i = 0; i < batch; ++i) REQUIRE(producer.try_push(numbered(pushed++)) == PushResult::ok);
        for (int i = 0; i < batch; ++i) {
            REQUIRE(consumer.try_pop(message) == PopResult::ok);
            REQUIRE(message.sequence == popped++);
        }
    }
    CHECK(ring.producer_side().head.load() == pushed);
    CHECK(pushed > 100 * ring.capacity);
}

TEST_CASE("each side keeps its index privately: a rewritten shared index never steers it") {
    Ring ring(8);
    RingProducer<Numbered> producer(ring.place(), ring.capacity);
    RingConsumer<Numbered> consumer(ring.place(), ring.capacity);
    REQUIRE(producer.try_push(numbered(0)) == PushResult::ok);
    Numbered message{};
    REQUIRE(consumer.try_pop(message) == PopResult::ok);

    // A stray write into each published index...
    ring.producer_side().head.store(5);
    ring.consumer_side().tail.store(4);
    // ...is overwritten by the next step of its writer, from the index it kept.
    REQUIRE(producer.try_push(numbered(1)) == PushResult::ok);
    CHECK(ring.producer_side().head.load() == 2);
    REQUIRE(consumer.try_pop(message) == PopResult::ok);
    CHECK(message.sequence == 1);
    CHECK(ring.consumer_side().tail.load() == 2);
}

TEST_CASE("indices corrupted by a peer are reported, never followed") {
    Ring ring(8);
    RingProducer<Numbered> producer(ring.place(), ring.capacity);
    RingConsumer<Numbered> consumer(ring.place(), ring.capacity);
    Numbered message{};

    SECTION("a head more than one lap ahead of the tail") {
        ring.producer_side().head.store(ring.capacity + 1);
        CHECK(consumer.try_pop(message) == PopResult::corrupt);
        CHECK(consumer.poll() == PopResult::corrupt);
        CHECK(consumer.wait(std::chrono::milliseconds(10)) == WaitResult::corrupt);
    }
    SECTION("a head behind the tail") {
        ring.producer_side().head.store(~std::uint64_t{0});
        CHECK(consumer.try_pop(message) == PopResult::corrupt);
    }
    SECTION("a tail ahead of the head") {
        for (std::uint64_t n = 0; n < ring.capacity; ++n) REQUIRE(producer.try_push(numbered(n)) == PushResult::ok);
        ring.consumer_side().tail.store(ring.capacity * 3);
        CHECK(producer.try_push(numbered(99)) == PushResult::corrupt);
    }
}
