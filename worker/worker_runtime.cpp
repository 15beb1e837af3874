#include "worker/worker_runtime.hpp"

#include "worker/device_factory.hpp"

#include <unistd.h>

#include <algorithm>
#include <stdexcept>

namespace comfy::worker {

namespace {

constexpr auto kHandshakeTimeout = std::chrono::seconds(30);

std::unique_ptr<Device> open_device(const WorkerEnvironment& environment, const ParticipantMemory& memory,
                                    DeviceAccountant& accountant, CensusWriter& census) {
    if (environment.cuda_device >= 0) return open_cuda_device(environment.cuda_device);
    return std::make_unique<SimulatedDevice>(memory.view, accountant, census);
}

// For waits that end only with their answer: far enough never to come, near enough that
// no clock arithmetic overflows.
Inbox::Clock::time_point no_deadline() { return Inbox::Clock::now() + std::chrono::hours(24 * 365); }

}  // namespace

WorkerRuntime::WorkerRuntime(const WorkerEnvironment& environment, std::uint64_t capabilities)
    : environment_(environment),
      memory_(environment),
      doorbell_(environment.doorbell_fd),
      outbound_(memory_.outbound(), memory_.view.capacities().ring_slots, &doorbell_),
      inbox_(memory_.inbound(), memory_.view.capacities().ring_slots, environment.generation),
      census_(memory_.own.census(), environment.generation),
      device_(open_device(environment, memory_, *this, census_)) {
    heartbeat_ = std::thread([this] { heartbeat_loop(); });
    Hello hello{};
    hello.pid = ::getpid();
    hello.layout_version = kLayoutVersion;
    hello.capabilities = capabilities;
    std::copy(environment.token.begin(), environment.token.end(), hello.token);
    // HelloAck answers with correlation 0, the Hello's.
    std::optional<Message> ack;
    try {
        ack = ask(encode(hello, environment.generation), Inbox::Clock::now() + kHandshakeTimeout);
    } catch (...) {
        stop_heartbeat();  // a joinable thread must not be destroyed
        throw;
    }
    if (!ack) {
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

std::optional<Message> WorkerRuntime::ask(const MessageSlot& request, Inbox::Clock::time_point deadline) {
    send(request);
    return inbox_.reply_to(request.header.correlation, deadline);
}

WorkerRuntime::AdmissionAnswer WorkerRuntime::request_admission(AdmissionRequest request,
                                                                std::span<const std::uint64_t> keep_loaded,
                                                                CommandHandler* evictions) {
    const std::uint64_t correlation = next_correlation();
    for (std::size_t first = 0; first < keep_loaded.size(); first += kKeepKeysPerMessage) {
        AdmissionKeep keep{};
        keep.count = static_cast<std::uint32_t>(std::min<std::size_t>(kKeepKeysPerMessage, keep_loaded.size() - first));
        std::copy_n(keep_loaded.begin() + static_cast<std::ptrdiff_t>(first), keep.count, keep.keys);
        send(encode(keep, environment_.generation, correlation));
    }
    request.keep_loaded_count = static_cast<std::uint32_t>(keep_loaded.size());
    send(encode(request, environment_.generation, correlation));
    std::optional<Message> reply;
    for (;;) {
        reply = evictions ? inbox_.reply_or_eviction(correlation, no_deadline())
                          : inbox_.reply_to(correlation, no_deadline());
        if (!reply || !is_eviction(reply->type())) break;
        evictions->on_command(*reply);
    }
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
    const auto reply = ask(encode(PinRequest{bytes}, environment_.generation, next_correlation()), no_deadline());
    if (!reply || reply->type() != MessageType::pin_grant) return 0;
    return std::min(bytes, std::get<PinGrant>(reply->payload).bytes_granted);
}

StandInResult WorkerRuntime::unload_standin(const StandInUnload& request, std::chrono::milliseconds wait) {
    const auto reply = ask(encode(request, environment_.generation, next_correlation()), Inbox::Clock::now() + wait);
    if (reply && reply->type() == MessageType::standin_result) return std::get<StandInResult>(reply->payload);
    StandInResult none{};
    none.model_id = request.model_id;
    none.loaded_bytes = kUnknownBytes;
    none.outcome = static_cast<std::uint32_t>(StandInOutcome::timed_out);
    return none;
}

bool WorkerRuntime::claim(std::uint64_t bytes) {
    const auto reply = ask(encode(DeviceAllocate{bytes}, environment_.generation, next_correlation()), no_deadline());
    return reply && reply->type() == MessageType::device_allocation &&
           std::get<DeviceAllocation>(reply->payload).granted != 0;
}

void WorkerRuntime::give_back(std::uint64_t bytes) { send(encode(DeviceRelease{bytes}, environment_.generation)); }

std::optional<Message> WorkerRuntime::next_command(std::chrono::milliseconds timeout) {
    return inbox_.next_command(Inbox::Clock::now() + timeout);
}

void WorkerRuntime::serve(CommandHandler& handler) {
    for (;;) {
        const auto command = next_command(std::chrono::seconds(1));
        if (!command) continue;
        handler.on_command(*command);
        if (command->type() == MessageType::shutdown) return;
    }
}

void WorkerRuntime::send(const MessageSlot& message) {
    const std::lock_guard lock(send_mutex_);
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
