#include "tests/bench/ring_transports.hpp"

#include "tests/bench/bench_error.hpp"
#include "tests/bench/message.hpp"
#include "tests/bench/shared_mapping.hpp"

#include "ipc/eventfd.hpp"
#include "ipc/spsc_ring.hpp"

#include <string>

namespace comfy::bench {

namespace {

using Producer = ipc::RingProducer<Message64>;
using Consumer = ipc::RingConsumer<Message64>;

// Only one message is ever in flight in a ping-pong, so a small ring suffices.
constexpr std::uint32_t kPingPongCapacity = 64;
// How long one futex wait may sleep before the receiver simply waits again. A dead peer
// is noticed by the SIGCHLD watchdog, not by this timeout.
constexpr std::chrono::seconds kFutexWaitSlice{1};

[[noreturn]] void throw_corrupt_ring(std::string_view who) {
    throw BenchError(std::string(who) + ": the ring reported a corrupt index, which is a bug in the ring or the "
                                        "benchmark: report it");
}

// Pushes, retrying while the consumer has not yet made room.
void push_retrying(Producer& producer, const Message64& message, std::string_view who) {
    for (;;) {
        switch (producer.try_push(message)) {
            case ipc::PushResult::ok: return;
            case ipc::PushResult::full: ipc::cpu_relax(); break;
            case ipc::PushResult::corrupt: throw_corrupt_ring(who);
        }
    }
}

// True when a message was popped into `message`.
bool try_pop_checked(Consumer& consumer, Message64& message, std::string_view who) {
    switch (consumer.try_pop(message)) {
        case ipc::PopResult::ok: return true;
        case ipc::PopResult::empty: return false;
        case ipc::PopResult::corrupt: break;
    }
    throw_corrupt_ring(who);
}

void pop_spinning(Consumer& consumer, Message64& message, std::string_view who) {
    while (!try_pop_checked(consumer, message, who)) ipc::cpu_relax();
}

std::string measurement_name(RingWake wake) {
    switch (wake) {
        case RingWake::spin: return "ring spin";
        case RingWake::futex: return "ring futex";
        case RingWake::eventfd: return "ring eventfd";
    }
    return "ring";
}

// A ring in the shared mapping, with the eventfd its consumer sleeps on in the eventfd variant.
struct RingWithDoorbell {
    void* memory;
    const ipc::EventFd& doorbell;
};

// One process's side: it produces into one ring and consumes from the other.
class RingEndpoint {
public:
    RingEndpoint(RingWithDoorbell outgoing, RingWithDoorbell incoming, RingWake wake, std::string_view who)
        : outgoing_(ipc::ring_in_block<Message64>(outgoing.memory, kPingPongCapacity), kPingPongCapacity,
                    &outgoing.doorbell),
          incoming_(ipc::ring_in_block<Message64>(incoming.memory, kPingPongCapacity), kPingPongCapacity),
          incoming_doorbell_(incoming.doorbell),
          wake_(wake),
          who_(who) {}

    void send(const Message64& message) { push_retrying(outgoing_, message, who_); }

    void receive(Message64& message) {
        switch (wake_) {
            case RingWake::spin: return pop_spinning(incoming_, message, who_);
            case RingWake::futex: return receive_after_futex_wait(message);
            case RingWake::eventfd: return receive_after_doorbell(message);
        }
    }

private:
    void receive_after_futex_wait(Message64& message) {
        for (;;) {
            switch (incoming_.wait(kFutexWaitSlice, kRingFutexSpin)) {
                case ipc::WaitResult::ready:
                    if (!try_pop_checked(incoming_, message, who_)) throw_corrupt_ring(who_);
                    return;
                case ipc::WaitResult::timed_out: break;
                case ipc::WaitResult::corrupt: throw_corrupt_ring(who_);
            }
        }
    }

    void receive_after_doorbell(Message64& message) {
        while (!try_pop_checked(incoming_, message, who_)) {
            // arm_doorbell raises the flag, then re-checks the ring: a push that raced with
            // it is found here instead of being slept through.
            const ipc::PopResult armed = incoming_.arm_doorbell();
            if (armed == ipc::PopResult::corrupt) throw_corrupt_ring(who_);
            if (armed == ipc::PopResult::empty) {
                // False only when a signal interrupted poll(): the descriptor is ours and valid.
                while (!incoming_doorbell_.wait_readable(-1)) {
                }
            }
            // Lower the flag whether or not we slept: arm_doorbell leaves it raised even
            // when it found a message. A doorbell rung then and never drained costs one
            // spurious wake-up later, which this loop absorbs.
            incoming_.disarm();
            if (armed == ipc::PopResult::empty) incoming_doorbell_.drain();
        }
    }

    Producer outgoing_;
    Consumer incoming_;
    const ipc::EventFd& incoming_doorbell_;
    RingWake wake_;
    std::string_view who_;
};

// Two rings in one shared mapping: ping (initiator to peer) and pong (peer to initiator),
// each with the eventfd its consumer may sleep on. The producer rings an eventfd only for
// a consumer that armed it, so the spin and futex variants never touch them.
class RingPingPongChannel {
public:
    RingPingPongChannel(RingWake wake, std::string_view who)
        : ring_stride_(round_up_to_cache_line(ipc::ring_bytes<Message64>(kPingPongCapacity))),
          memory_(2 * ring_stride_),
          wake_(wake),
          who_(who) {
        ipc::ring_initialize<Message64>(ping_ring(), kPingPongCapacity);
        ipc::ring_initialize<Message64>(pong_ring(), kPingPongCapacity);
    }

    RingEndpoint initiator() {
        return {{ping_ring(), ping_doorbell_}, {pong_ring(), pong_doorbell_}, wake_, who_};
    }
    RingEndpoint peer() {
        return {{pong_ring(), pong_doorbell_}, {ping_ring(), ping_doorbell_}, wake_, who_};
    }

private:
    void* ping_ring() const noexcept { return memory_.data(); }
    void* pong_ring() const noexcept { return memory_.data() + ring_stride_; }

    std::size_t ring_stride_;
    SharedMapping memory_;
    ipc::EventFd ping_doorbell_;
    ipc::EventFd pong_doorbell_;
    RingWake wake_;
    std::string_view who_;
};

}  // namespace

LatencySummary measure_ring_round_trips(RingWake wake, const RoundTripPlan& plan, const CpuPlacement& cpus) {
    const std::string measurement = measurement_name(wake);
    RingPingPongChannel channel(wake, measurement);
    return measure_round_trips(measurement, channel, plan, cpus);
}

double measure_ring_throughput(std::uint64_t messages, std::uint32_t capacity, const CpuPlacement& cpus) {
    constexpr std::string_view measurement = "ring throughput";
    SharedMapping memory(round_up_to_cache_line(ipc::ring_bytes<Message64>(capacity)));
    ipc::ring_initialize<Message64>(memory.data(), capacity);

    auto push_all = [&] {
        Producer producer(ipc::ring_in_block<Message64>(memory.data(), capacity), capacity);
        Message64 message;
        for (std::uint64_t sequence = 0; sequence < messages; ++sequence) {
            message.sequence = sequence;
            push_retrying(producer, message, measurement);
        }
    };
    auto pop_all_timed = [&] {
        Consumer consumer(ipc::ring_in_block<Message64>(memory.data(), capacity), capacity);
        Message64 message;
        // The clock starts at the first message, so fork and start-up are not counted.
        pop_spinning(consumer, message, measurement);
        check_sequence(measurement, 0, message.sequence);
        const auto start = std::chrono::steady_clock::now();
        for (std::uint64_t sequence = 1; sequence < messages; ++sequence) {
            pop_spinning(consumer, message, measurement);
            check_sequence(measurement, sequence, message.sequence);
        }
        const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
        return static_cast<double>(messages - 1) / elapsed.count();
    };
    return run_with_peer_process(measurement, cpus, push_all, pop_all_timed);
}

}  // namespace comfy::bench
