#pragma once
// A single-producer single-consumer ring of fixed-size messages living in shared memory.
//
// Why not boost::lockfree::spsc_queue: it keeps both indices in the shared object and
// trusts them, so a peer that corrupts them makes it read or write out of bounds, and it
// has no way to sleep. Here each side keeps its own index privately, publishes it, and
// validates the peer's before use; waiting is a bounded spin, then a shared futex (or an
// eventfd for consumers inside an event loop), with a waiter flag so a producer makes no
// system call while the consumer is awake.

#include "ipc/eventfd.hpp"
#include "ipc/futex.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace comfy::ipc {

inline constexpr std::size_t kCacheLine = 64;

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

// Who, if anyone, sleeps waiting for the producer.
enum class Waiter : std::uint32_t { none = 0, futex = 1, eventfd = 2 };

// A ring lives in two halves, each in memory its writer owns, so that each side can map
// the other's half read-only: the producer's half holds the slots, its head and the wake
// word; the consumer's half holds its tail and its waiter flag. Each index sits on its own
// cache line so the two sides never write the same line on the fast path.
struct RingProducerSide {
    alignas(kCacheLine) std::atomic<std::uint64_t> head;       // written by the producer only
    alignas(kCacheLine) std::atomic<std::uint32_t> wake_word;  // producer bumps it to wake a futex sleeper
};
struct RingConsumerSide {
    alignas(kCacheLine) std::atomic<std::uint64_t> tail;    // written by the consumer only
    alignas(kCacheLine) std::atomic<std::uint32_t> waiter;  // consumer writes a Waiter value
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "ring indices must be lock-free to be shared between processes");
static_assert(std::atomic<std::uint32_t>::is_always_lock_free,
              "ring flags must be lock-free to be shared between processes");
static_assert(std::is_standard_layout_v<RingProducerSide> && std::is_standard_layout_v<RingConsumerSide>);

constexpr bool valid_ring_capacity(std::uint32_t capacity) noexcept {
    return capacity >= 2 && (capacity & (capacity - 1)) == 0;
}

// The producer's half: its control, then `capacity` slots.
template <class T>
constexpr std::size_t ring_producer_bytes(std::uint32_t capacity) noexcept {
    return sizeof(RingProducerSide) + std::size_t{capacity} * sizeof(T);
}
inline constexpr std::size_t kRingConsumerBytes = sizeof(RingConsumerSide);

// Where a ring's two halves are. Each must be aligned to a cache line.
struct RingPlace {
    void* producer_side;
    void* consumer_side;
};

// An empty producer half at `memory` (ring_producer_bytes<T>(capacity) bytes). Only its
// owner calls this, before the consumer can see the ring, or once the consumer is gone.
template <class T>
void ring_initialize_producer_side(void* memory, std::uint32_t capacity) noexcept {
    auto* side = new (memory) RingProducerSide{};
    // Relaxed: nobody can see the ring yet; publication (or the spawn) orders these.
    side->head.store(0, std::memory_order_relaxed);
    side->wake_word.store(0, std::memory_order_relaxed);
    std::memset(static_cast<std::byte*>(memory) + sizeof(RingProducerSide), 0, std::size_t{capacity} * sizeof(T));
}

// An empty consumer half at `memory`, under the same rule.
inline void ring_initialize_consumer_side(void* memory) noexcept {
    auto* side = new (memory) RingConsumerSide{};
    // Relaxed: as above.
    side->tail.store(0, std::memory_order_relaxed);
    side->waiter.store(static_cast<std::uint32_t>(Waiter::none), std::memory_order_relaxed);
}

// Both halves side by side in one block, for a ring whose two ends trust the same memory
// (threads of one process, tests, benchmarks): the producer half, then the consumer half.
template <class T>
constexpr std::size_t ring_bytes(std::uint32_t capacity) noexcept {
    return (ring_producer_bytes<T>(capacity) + kCacheLine - 1) / kCacheLine * kCacheLine + kRingConsumerBytes;
}

template <class T>
RingPlace ring_in_block(void* memory, std::uint32_t capacity) noexcept {
    auto* base = static_cast<std::byte*>(memory);
    return {base, base + ring_bytes<T>(capacity) - kRingConsumerBytes};
}

// An empty ring in one block of ring_bytes<T>(capacity) bytes, aligned to a cache line.
template <class T>
void ring_initialize(void* memory, std::uint32_t capacity) noexcept {
    const RingPlace place = ring_in_block<T>(memory, capacity);
    ring_initialize_producer_side<T>(place.producer_side, capacity);
    ring_initialize_consumer_side(place.consumer_side);
}

enum class PushResult { ok, full, corrupt };
enum class PopResult { ok, empty, corrupt };
enum class WaitResult { ready, timed_out, corrupt };

namespace detail {
template <class T>
struct RingMemory {
    RingProducerSide* producer;
    RingConsumerSide* consumer;
    std::byte* slots;
    std::uint64_t capacity;  // from the trusted layout, never from the shared bytes

    RingMemory(RingPlace place, std::uint32_t cap) noexcept
        : producer(static_cast<RingProducerSide*>(place.producer_side)),
          consumer(static_cast<RingConsumerSide*>(place.consumer_side)),
          slots(static_cast<std::byte*>(place.producer_side) + sizeof(RingProducerSide)),
          capacity(cap) {}
    std::byte* slot(std::uint64_t index) const noexcept {
        return slots + (index & (capacity - 1)) * sizeof(T);
    }
};
}  // namespace detail

template <class T>
class RingProducer {
    static_assert(std::is_trivially_copyable_v<T>, "ring messages are copied as bytes");

public:
    // `capacity` must come from the layout this process trusts, and the ring must be
    // empty and freshly initialised: the producer keeps its index privately from 0 and
    // never takes it from the shared bytes, which the consumer's side could have changed.
    RingProducer(RingPlace place, std::uint32_t capacity, const EventFd* doorbell = nullptr) noexcept
        : ring_(place, capacity), doorbell_(doorbell) {}

    // Copies `message` into the ring without blocking, then wakes a sleeping consumer.
    PushResult try_push(const T& message) noexcept {
        if (head_ - cached_tail_ >= ring_.capacity) {
            // Acquire: once the consumer's tail moves past a slot, its reads of it are done.
            cached_tail_ = ring_.consumer->tail.load(std::memory_order_acquire);
            if (head_ - cached_tail_ > ring_.capacity) return PushResult::corrupt;
            if (head_ - cached_tail_ == ring_.capacity) return PushResult::full;
        }
        std::memcpy(ring_.slot(head_), &message, sizeof(T));
        ++head_;
        // Release: the slot's bytes become visible before the new head does.
        ring_.producer->head.store(head_, std::memory_order_release);
        wake_consumer();
        return PushResult::ok;
    }

private:
    void wake_consumer() noexcept {
        // Seq_cst fence: orders our head store before the waiter load, pairing with the
        // consumer's fence between its waiter store and head load (Dekker), so either we
        // see its flag or it sees our message.
        std::atomic_thread_fence(std::memory_order_seq_cst);
        // Relaxed: the fence above already orders this load.
        const auto waiter = static_cast<Waiter>(ring_.consumer->waiter.load(std::memory_order_relaxed));
        if (waiter == Waiter::futex) {
            // Release: a woken consumer that reads the new word also sees the message.
            ring_.producer->wake_word.fetch_add(1, std::memory_order_release);
            futex_wake_shared(ring_.producer->wake_word, 1);
        } else if (waiter == Waiter::eventfd && doorbell_ != nullptr) {
            doorbell_->signal();
        }
    }

    detail::RingMemory<T> ring_;
    const EventFd* doorbell_;
    std::uint64_t head_ = 0;
    std::uint64_t cached_tail_ = 0;
};

template <class T>
class RingConsumer {
    static_assert(std::is_trivially_copyable_v<T>, "ring messages are copied as bytes");

public:
    // As for the producer: a fresh ring, and the index kept privately from 0.
    RingConsumer(RingPlace place, std::uint32_t capacity) noexcept : ring_(place, capacity) {}

    // Copies the oldest message into `out` without blocking.
    PopResult try_pop(T& out) noexcept {
        if (cached_head_ == tail_) {
            const auto state = refresh_head();
            if (state != PopResult::ok) return state;
        }
        std::memcpy(&out, ring_.slot(tail_), sizeof(T));
        ++tail_;
        // Release: our reads of the slot finish before the producer may reuse it.
        ring_.consumer->tail.store(tail_, std::memory_order_release);
        return PopResult::ok;
    }

    // Waits until a message is available: spins for `spin`, then sleeps on the shared
    // futex until `timeout` has passed in all.
    WaitResult wait(std::chrono::nanoseconds timeout,
                    std::chrono::nanoseconds spin = std::chrono::microseconds(50)) noexcept {
        using clock = std::chrono::steady_clock;
        const auto start = clock::now();
        const auto spin_end = start + std::min(spin, timeout);
        for (unsigned i = 0;; ++i) {
            if (const auto s = poll(); s != PopResult::empty) return to_wait(s);
            if ((i & 63) == 0 && clock::now() >= spin_end) break;
            cpu_relax();
        }
        const auto deadline = start + timeout;
        for (;;) {
            // Acquire: pairs with the producer's release increment of the word.
            const std::uint32_t seen = ring_.producer->wake_word.load(std::memory_order_acquire);
            const auto state = announce(Waiter::futex);
            if (state != PopResult::empty) {
                withdraw();
                return to_wait(state);
            }
            const auto left = deadline - clock::now();
            const auto woke = futex_wait_shared(ring_.producer->wake_word, seen, left);
            withdraw();
            if (const auto s = poll(); s != PopResult::empty) return to_wait(s);
            if (woke == FutexWaitResult::timed_out || clock::now() >= deadline) return WaitResult::timed_out;
        }
    }

    // For a consumer inside an event loop: asks the producer to ring the eventfd on its
    // next push. Returns `ok` when a message is already waiting: do not sleep then, and
    // still call disarm() before popping. Only useful when the producer was given the
    // doorbell; a producer without one never rings it. A ring may arrive for a message
    // already popped, so a woken consumer must tolerate finding the ring empty.
    PopResult arm_doorbell() noexcept { return announce(Waiter::eventfd); }
    // Called after waking (or after arm_doorbell() said `ok`): the producer stops ringing.
    void disarm() noexcept { withdraw(); }

    // Non-blocking check: `ok` when a message is waiting.
    PopResult poll() noexcept { return cached_head_ != tail_ ? PopResult::ok : refresh_head(); }

private:
    PopResult refresh_head() noexcept {
        // Acquire: pairs with the producer's release of head, so the slots are written.
        const std::uint64_t head = ring_.producer->head.load(std::memory_order_acquire);
        // Validate: head never runs behind our tail nor more than one lap ahead.
        if (head - tail_ > ring_.capacity) return PopResult::corrupt;
        cached_head_ = head;
        return head == tail_ ? PopResult::empty : PopResult::ok;
    }

    PopResult announce(Waiter how) noexcept {
        // Relaxed: the fence below orders it before the head re-check.
        ring_.consumer->waiter.store(static_cast<std::uint32_t>(how), std::memory_order_relaxed);
        // Seq_cst fence: pairs with the producer's fence (see wake_consumer).
        std::atomic_thread_fence(std::memory_order_seq_cst);
        return poll();
    }

    void withdraw() noexcept {
        // Relaxed: a stale flag only costs the producer one needless wake-up.
        ring_.consumer->waiter.store(static_cast<std::uint32_t>(Waiter::none), std::memory_order_relaxed);
    }

    static WaitResult to_wait(PopResult s) noexcept {
        return s == PopResult::ok ? WaitResult::ready : WaitResult::corrupt;
    }

    detail::RingMemory<T> ring_;
    std::uint64_t tail_ = 0;
    std::uint64_t cached_head_ = 0;
};

}  // namespace comfy::ipc
