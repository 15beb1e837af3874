#pragma once
// A participant's inbound ring (supervisor to participant), sorted into replies to this
// process's requests and commands. The ring has one consumer, but a participant may have
// two threads waiting on it: a Python host takes commands on a background thread while
// its main thread waits for an admission. Whichever thread waits reads the ring for both
// and hands the other what is its, so the ring still has one reader at a time.

#include "ipc/spsc_ring.hpp"
#include "shared/message_codec.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>

namespace comfy::worker {

class Inbox {
public:
    using Clock = std::chrono::steady_clock;

    // `ring` is the to-participant ring of `generation`'s slot.
    Inbox(ipc::RingPlace ring, std::uint32_t ring_slots, std::uint32_t generation);

    // The reply to the request with this correlation id. Nothing when `deadline` passes,
    // or when a Shutdown arrived first (the Shutdown stays for next_command()).
    std::optional<Message> reply_to(std::uint64_t correlation, Clock::time_point deadline);
    // The same, or before it the oldest eviction command (partial_unload, detach) not
    // taken yet: a participant waiting for admission must answer those meanwhile, since
    // the arbiter may ask it to evict its own models to make room. An eviction may pass
    // the commands queued ahead of it: it does not depend on them.
    std::optional<Message> reply_or_eviction(std::uint64_t correlation, Clock::time_point deadline);
    // The oldest command not taken yet; nothing when `deadline` passes first.
    std::optional<Message> next_command(Clock::time_point deadline);
    // Both throw std::runtime_error when the ring is corrupt.

private:
    // Waits until done() (called under mutex_) says so or the deadline passes, reading
    // the ring meanwhile unless another thread is reading it.
    // `spin` is how long the reading thread polls before it sleeps on the ring.
    template <class Done>
    void wait_until(Clock::time_point deadline, std::chrono::nanoseconds spin, Done done);
    // Waits up to `deadline` for messages and takes all there are. Only the thread that
    // set reading_ calls it, without holding mutex_.
    std::deque<Message> read_ring(Clock::time_point deadline, std::chrono::nanoseconds spin);
    void sort(const Message& message);
    // Under mutex_: moves the reply with this correlation id into `reply`; true when it did,
    // or when a Shutdown arrived (no reply will come).
    bool take_reply(std::uint64_t correlation, std::optional<Message>& reply);

    ipc::RingConsumer<MessageSlot> ring_;
    std::uint32_t generation_;
    std::mutex mutex_;  // process-local: guards what follows
    std::condition_variable changed_;
    bool reading_ = false;  // a thread is reading the ring
    bool shutdown_seen_ = false;
    std::deque<Message> commands_;
    std::map<std::uint64_t, Message> replies_;  // by correlation id
};

}  // namespace comfy::worker
