#include "worker/worker_runtime.hpp"

#include "worker/device_factory.hpp"

#include <unistd.h>

#include <stdexcept>

namespace comfy::worker {

namespace {
constexpr auto kHandshakeTimeout = std::chrono::seconds(30);
}

WorkerRuntime::WorkerRuntime(const WorkerEnvironment& environment, std::uint64_t capabilities)
    : environment_(environment),
      segment_(attach_segment(environment.instance)),
      view_(view_of(segment_)),
      doorbell_(environment.doorbell_fd),
      outbound_(view_.from_participant_ring(environment.slot), view_.capacities().ring_slots, &doorbell_),
      inbound_(view_.to_participant_ring(environment.slot), view_.capacities().ring_slots),
      census_(view_.census(environment.slot), environment.generation),
      device_(environment.cuda_device >= 0 ? open_cuda_device(environment.cuda_device)
                                           : std::make_unique<SimulatedDevice>(view_, census_)) {
    if (environment.slot >= view_.capacities().participants) {
        throw std::runtime_error("slot " + std::to_string(environment.slot) + " is outside the segment's " +
                                 std::to_string(view_.capacities().participants) + " participant slots");
    }
    heartbeat_ = std::thread([this] { heartbeat_loop(); });
    Hello hello{};
    hello.pid = ::getpid();
    hello.layout_version = kLayoutVersion;
    hello.capabilities = capabilities;
    std::copy(environment.token.begin(), environment.token.end(), hello.token);
    send(encode(hello, environment.generation));
    if (!wait_for_hello_ack(kHandshakeTimeout)) {
        stop_heartbeat();
        throw std::runtime_error("the supervisor did not accept this worker's Hello within 30 s");
    }
}

WorkerRuntime::~WorkerRuntime() { stop_heartbeat(); }

void WorkerRuntime::stop_heartbeat() {
    {
        const std::lock_guard lock(heartbeat_mutex_);
        stopping_ = true;
    }
    heartbeat_wake_.notify_one();
    if (heartbeat_.joinable()) heartbeat_.join();
}

void WorkerRuntime::heartbeat_loop() {
    // Waits on a condition variable rather than sleeping, so shutdown is not delayed by
    // up to one heartbeat interval.
    std::unique_lock lock(heartbeat_mutex_);
    while (!stopping_) {
        census_.beat();
        heartbeat_wake_.wait_for(lock, environment_.heartbeat_interval, [this] { return stopping_; });
    }
}

bool WorkerRuntime::wait_for_hello_ack(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    MessageSlot slot{};
    while (std::chrono::steady_clock::now() < deadline) {
        const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - std::chrono::steady_clock::now());
        if (inbound_.wait(left) != ipc::WaitResult::ready) continue;
        if (inbound_.try_pop(slot) != ipc::PopResult::ok) continue;
        const auto decoded = decode(slot);
        if (!decoded.ok() || decoded.message.header.generation != environment_.generation) continue;
        if (decoded.message.type() == MessageType::hello_ack) return true;
        if (decoded.message.type() == MessageType::shutdown) return false;
    }
    return false;
}

std::optional<Message> WorkerRuntime::ask(const MessageSlot& request) {
    const std::uint64_t correlation = request.header.correlation;
    send(request);
    MessageSlot slot{};
    for (;;) {
        if (inbound_.wait(std::chrono::seconds(1)) == ipc::WaitResult::corrupt) {
            throw std::runtime_error("the supervisor's command ring is corrupt; exiting so the supervisor restarts us");
        }
        while (inbound_.try_pop(slot) == ipc::PopResult::ok) {
            const auto decoded = decode(slot);
            if (!decoded.ok() || decoded.message.header.generation != environment_.generation) continue;
            if (decoded.message.header.correlation == correlation) return decoded.message;
            kept_commands_.push_back(decoded.message);
            if (decoded.message.type() == MessageType::shutdown) return std::nullopt;
        }
    }
}

WorkerRuntime::AdmissionAnswer WorkerRuntime::request_admission(const AdmissionRequest& request) {
    const auto reply = ask(encode(request, environment_.generation, next_correlation()));
    if (reply && reply->type() == MessageType::admission_grant) {
        return {true, std::get<AdmissionGrant>(reply->payload), {}};
    }
    if (reply && reply->type() == MessageType::admission_refused) {
        return {false, {}, std::get<AdmissionRefused>(reply->payload)};
    }
    AdmissionRefused refusal{};
    refusal.reason = static_cast<std::uint32_t>(RefusalReason::shutting_down);
    return {false, {}, refusal};
}

std::uint64_t WorkerRuntime::request_pin(std::uint64_t bytes) {
    const auto reply = ask(encode(PinRequest{bytes}, environment_.generation, next_correlation()));
    if (!reply || reply->type() != MessageType::pin_grant) return 0;
    return std::min(bytes, std::get<PinGrant>(reply->payload).bytes_granted);
}

void WorkerRuntime::serve(CommandHandler& handler) {
    for (;;) {
        // Commands kept while a handler waited for an admission run first, in order.
        while (!kept_commands_.empty()) {
            const Message command = kept_commands_.front();
            kept_commands_.pop_front();
            handler.on_command(command);
            if (command.type() == MessageType::shutdown) return;
        }
        if (inbound_.wait(std::chrono::seconds(1)) == ipc::WaitResult::corrupt) {
            throw std::runtime_error("the supervisor's command ring is corrupt; exiting so the supervisor restarts us");
        }
        MessageSlot slot{};
        // One at a time: a handler may call request_admission, which reads this ring too.
        if (inbound_.try_pop(slot) != ipc::PopResult::ok) continue;
        const auto decoded = decode(slot);
        // The supervisor is trusted, but a message for an older generation of this slot
        // (left in the ring) must not be applied.
        if (!decoded.ok() || decoded.message.header.generation != environment_.generation) continue;
        handler.on_command(decoded.message);
        if (decoded.message.type() == MessageType::shutdown) return;
    }
}

void WorkerRuntime::send(const MessageSlot& message) {
    for (;;) {
        const auto state = outbound_.try_push(message);
        if (state == ipc::PushResult::ok) return;
        if (state == ipc::PushResult::corrupt) {
            throw std::runtime_error("the ring to the supervisor is corrupt; exiting so the supervisor restarts us");
        }
        // Full: the supervisor is behind; a short sleep beats spinning on a shared core.
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
}

}  // namespace comfy::worker
