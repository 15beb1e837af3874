#pragma once
// What the ring is compared against, each as a round trip of one message between two
// processes: the floor (a bare spin on one shared word) and the kernel and library
// mechanisms one would otherwise use (eventfd, Unix socket, pipe, Boost.Interprocess
// message_queue).

#include "tests/bench/peer_process.hpp"
#include "tests/bench/round_trip.hpp"

namespace comfy::bench {

// Both processes spin on one std::atomic<uint64_t> in shared memory, taking turns to write
// it; no payload moves, so nothing that carries a message can be faster.
LatencySummary measure_shared_word_floor(const RoundTripPlan& plan, const CpuPlacement& cpus);

// Two blocking eventfds, one each way; the 8-byte counter carries the sequence number.
LatencySummary measure_eventfd_ping_pong(const RoundTripPlan& plan, const CpuPlacement& cpus);

// A blocking AF_UNIX SOCK_STREAM socketpair carrying the 64-byte message.
LatencySummary measure_unix_socket_ping_pong(const RoundTripPlan& plan, const CpuPlacement& cpus);

// Two blocking pipes, one each way, carrying the 64-byte message.
LatencySummary measure_pipe_ping_pong(const RoundTripPlan& plan, const CpuPlacement& cpus);

// Two Boost.Interprocess message_queues (POSIX shared memory), one each way.
LatencySummary measure_boost_message_queue_ping_pong(const RoundTripPlan& plan, const CpuPlacement& cpus);

}  // namespace comfy::bench
