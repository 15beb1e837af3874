#include "worker/inbox.hpp"

#include <algorithm>
#include <exception>
#include <stdexcept>

namespace comfy::worker {

namespace {

// A reply follows its request within microseconds: polling a little first saves the
// sleep and wake-up. A command comes whenever the supervisor has one, so the wait for it
// sleeps at once: a participant spinning there holds a core that others need (eight
// workers woken for one admission ran one after another, about 90 µs apart, on two cores
// while each spun after its answer).
constexpr auto kReplySpin = std::chrono::microseconds(50);
constexpr auto kCommandSpin = std::chrono::nanoseconds(0);

constexpr const char* kCorrupt = "the supervisor's command ring is corrupt; exiting so the supervisor restarts us";

bool is_reply(MessageType type) {
    return type == MessageType::hello_ack || type == MessageType::admission_grant ||
           type == MessageType::admission_refused || type == MessageType::pin_grant ||
           type == MessageType::standin_result || type == MessageType::device_allocation;
}

}  // namespace

Inbox::Inbox(ipc::RingPlace ring, std::uint32_t ring_slots, std::uint32_t generation)
    : ring_(ring, ring_slots), generation_(generation) {}

std::optional<Message> Inbox::reply_to(std::uint64_t correlation, Clock::time_point deadline) {
    std::optional<Message> reply;
    wait_until(deadline, kReplySpin, [&] { return take_reply(correlation, reply); });
    return reply;
}

std::optional<Message> Inbox::reply_or_eviction(std::uint64_t correlation, Clock::time_point deadline) {
    std::optional<Message> taken;
    wait_until(deadline, kReplySpin, [&] {
        const auto eviction =
            std::find_if(commands_.begin(), commands_.end(), [](const Message& m) { return is_eviction(m.type()); });
        if (eviction == commands_.end()) return take_reply(correlation, taken);
        taken = *eviction;
        commands_.erase(eviction);
        return true;
    });
    return taken;
}

bool Inbox::take_reply(std::uint64_t correlation, std::optional<Message>& reply) {
    const auto found = replies_.find(correlation);
    if (found == replies_.end()) return shutdown_seen_;
    reply = found->second;
    replies_.erase(found);
    return true;
}

std::optional<Message> Inbox::next_command(Clock::time_point deadline) {
    std::optional<Message> command;
    wait_until(deadline, kCommandSpin, [&] {
        if (commands_.empty()) return false;
        command = commands_.front();
        commands_.pop_front();
        return true;
    });
    return command;
}

template <class Done>
void Inbox::wait_until(Clock::time_point deadline, std::chrono::nanoseconds spin, Done done) {
    std::unique_lock lock(mutex_);
    while (!done() && Clock::now() < deadline) {
        if (reading_) {
            // The reader wakes us once it has sorted what it read.
            changed_.wait_until(lock, deadline);
            continue;
        }
        reading_ = true;
        lock.unlock();
        std::deque<Message> arrived;
        std::exception_ptr failure;
        try {
            arrived = read_ring(deadline, spin);
        } catch (...) {
            failure = std::current_exception();
        }
        lock.lock();
        reading_ = false;
        for (const auto& message : arrived) sort(message);
        changed_.notify_all();
        if (failure) std::rethrow_exception(failure);
    }
}

std::deque<Message> Inbox::read_ring(Clock::time_point deadline, std::chrono::nanoseconds spin) {
    const auto left = std::max(Clock::duration::zero(), deadline - Clock::now());
    if (ring_.wait(left, spin) == ipc::WaitResult::corrupt) throw std::runtime_error(kCorrupt);
    std::deque<Message> arrived;
    MessageSlot slot{};
    for (;;) {
        const auto state = ring_.try_pop(slot);
        if (state == ipc::PopResult::empty) return arrived;
        if (state == ipc::PopResult::corrupt) throw std::runtime_error(kCorrupt);
        const auto decoded = decode(slot);
        // The supervisor is trusted, but a message for an older generation of this slot
        // (left in the ring) must not be applied.
        if (decoded.ok() && decoded.message.header.generation == generation_) arrived.push_back(decoded.message);
    }
}

void Inbox::sort(const Message& message) {
    if (is_reply(message.type())) {
        replies_[message.header.correlation] = message;
        return;
    }
    if (message.type() == MessageType::shutdown) shutdown_seen_ = true;
    commands_.push_back(message);
}

}  // namespace comfy::worker
