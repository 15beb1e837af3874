#pragma once
// The worker runtime: what a worker process links to take part. It maps the supervisor's
// segment read-only and its own region writable (both from inherited descriptors), proves
// itself with its token (Hello), keeps a heartbeat from a
// thread of its own, receives commands through a handler, and sends events and replies.
// The edge is small and template-free so that a Python binding can wrap it.

#include "shared/message_codec.hpp"
#include "worker/census_writer.hpp"
#include "worker/inbox.hpp"
#include "worker/participant_memory.hpp"
#include "worker/simulated_device.hpp"
#include "worker/worker_environment.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <memory>
#include <optional>
#include <span>
#include <thread>

namespace comfy::worker {

class CommandHandler {
public:
    virtual ~CommandHandler() = default;
    // Called for every valid command of this generation, in order, on the serving thread.
    virtual void on_command(const Message& command) = 0;
};

class WorkerRuntime : private DeviceAccountant {
public:
    // Attaches, starts the heartbeat, says Hello and waits for the supervisor's answer.
    // Throws std::runtime_error with one line when any step fails.
    WorkerRuntime(const WorkerEnvironment& environment, std::uint64_t capabilities);
    ~WorkerRuntime();
    WorkerRuntime(const WorkerRuntime&) = delete;
    WorkerRuntime& operator=(const WorkerRuntime&) = delete;

    std::uint32_t slot() const noexcept { return environment_.slot; }
    std::uint32_t generation() const noexcept { return environment_.generation; }
    CensusWriter& census() noexcept { return census_; }
    Device& device() noexcept { return *device_; }

    // Serves commands until Shutdown arrives (passed to the handler first). Returns
    // normally then; throws std::runtime_error when the inbound ring is corrupt.
    void serve(CommandHandler& handler);

    // The next command of this generation, in order (those that arrived while a request
    // waited for its reply included); nothing after `timeout`. Throws std::runtime_error
    // when the inbound ring is corrupt. One thread may take commands while another waits
    // in request_admission() or request_pin().
    std::optional<Message> next_command(std::chrono::milliseconds timeout);

    // Queues one message to the supervisor, waiting while the ring is full. Safe from
    // several threads.
    void send(const MessageSlot& message);

    // A fresh correlation id for a request to the supervisor.
    std::uint64_t next_correlation() noexcept {
        // Relaxed: only uniqueness matters, and the increment is atomic whatever the order.
        return last_correlation_.fetch_add(1, std::memory_order_relaxed) + 1;
    }

    // Asks the supervisor to admit a load, keeping `keep_loaded` (machine_model_key()s,
    // any number: sent ahead in admission_keep messages), and waits for its answer.
    // Commands that arrive meanwhile are kept, in order, for next_command(), except that
    // evictions go to `evictions` at once when one is given: a participant with a thread
    // of its own for commands serves them there instead. A Shutdown arriving first
    // answers the request as refused (shutting down).
    struct AdmissionAnswer {
        bool granted = false;
        AdmissionGrant grant{};
        AdmissionRefused refusal{};
    };
    AdmissionAnswer request_admission(AdmissionRequest request, std::span<const std::uint64_t> keep_loaded,
                                      CommandHandler* evictions = nullptr);

    // Asks the supervisor's leave to pin `bytes` of host memory; returns the bytes granted
    // (maybe fewer, or 0 under host memory pressure or during shutdown).
    std::uint64_t request_pin(std::uint64_t bytes);

    // The ComfyUI host's stand-in entry of another participant's model was asked to unload:
    // asks the supervisor to have its owner do it, and waits for what the owner measured.
    // The arbiter answers within its answer timeout; a Shutdown first, or no answer within
    // `wait`, comes back as timed_out.
    StandInResult unload_standin(const StandInUnload& request, std::chrono::milliseconds wait);

    // The supervisor's segment, read-only: the ledger of every participant's models.
    const SegmentView& segment() const noexcept { return memory_.view; }

private:
    // DeviceAccountant, for the simulated device: an allocation asked of the supervisor
    // (waiting for its answer as for an admission), and a release told to it.
    bool claim(std::uint64_t bytes) override;
    void give_back(std::uint64_t bytes) override;

    // Sends a request and waits for the reply with its correlation id, keeping other
    // commands for next_command(). Nothing when a Shutdown arrives first or the deadline passes.
    std::optional<Message> ask(const MessageSlot& request, Inbox::Clock::time_point deadline);
    void heartbeat_loop();
    void stop_heartbeat();

    WorkerEnvironment environment_;
    ParticipantMemory memory_;
    ipc::EventFd doorbell_;
    std::mutex send_mutex_;  // process-local: the outbound ring has one producer at a time
    ipc::RingProducer<MessageSlot> outbound_;
    Inbox inbox_;
    CensusWriter census_;
    std::unique_ptr<Device> device_;  // simulated, or CUDA when the supervisor says so

    std::mutex heartbeat_mutex_;  // process-local: guards stopping_ for the condition variable
    std::condition_variable heartbeat_wake_;
    bool stopping_ = false;
    std::thread heartbeat_;
    std::atomic<std::uint64_t> last_correlation_{0};  // process-local
};

}  // namespace comfy::worker
