#pragma once
// Our shared-memory SPSC ring (ipc/spsc_ring.hpp) measured between two processes: round
// trips with each way of waiting for a message, and one-way throughput.

#include "tests/bench/peer_process.hpp"
#include "tests/bench/round_trip.hpp"

#include <chrono>
#include <cstdint>

namespace comfy::bench {

// How a receiving side waits for the next message.
enum class RingWake {
    spin,     // busy-polls try_pop
    futex,    // RingConsumer::wait, spinning for kRingFutexSpin before the shared futex
    eventfd,  // arms the doorbell and sleeps in poll() on the ring's eventfd
};

// Zero, so every wait that finds the ring empty really goes to sleep on the futex: the
// figure measures the futex path, not a spin that happens to catch the reply.
inline constexpr std::chrono::nanoseconds kRingFutexSpin{0};

LatencySummary measure_ring_round_trips(RingWake wake, const RoundTripPlan& plan, const CpuPlacement& cpus);

// The peer pushes `messages` numbered messages as fast as the ring takes them; this process
// pops them busy-polling and checks their order. Returns messages per second, timed from
// the first message received to the last.
double measure_ring_throughput(std::uint64_t messages, std::uint32_t capacity, const CpuPlacement& cpus);

}  // namespace comfy::bench
