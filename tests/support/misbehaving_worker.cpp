// A worker that breaks the protocol on purpose, for the supervisor's refusal, flood and
// containment tests and the soak (tests/soak):
//   misbehaving-worker MODE [--when-signalled]
//   misbehaving-worker deaf-filler COUNT
// Protocol modes (it sends what the mode says and waits to be stopped):
//   wrong-token | wrong-version | early-message
//   keep-mismatch   after a good Hello, an admission that claims more kept models than its
//                   admission_keep messages named
//   standin-unload  after a good Hello, a standin_unload (which only the ComfyUI host sends)
//                   naming a model of slot 0
//   ready-unasked   after a good Hello that does not say it will, a ready
//   ready-twice     after a Hello that says it will say ready (kCapReadyLater), two
//   early-node      after that Hello, a node_started before any ready
//   never-ready     after that Hello, its heartbeat and never a ready (its start-up hangs)
// Flood modes (it sends what the mode says, never reads what comes back):
//   admission-flood once another pack holds a model, 20,000 admission requests that queue
//                   behind the eviction of a model of its own that it never answers
//   answer-flood    20,000 small admission and pin requests, each answered at once, whose
//                   answers it never takes
//   node-flood      20,000 nodes started and finished, asking for the release after each,
//                   which it never takes
//   ledger-flood    20,000 models registered at once
// Hostile modes (after a good Hello, keeping its heartbeat, as a compromised pack would):
//   write-header | write-ledger | write-participant | write-ring-half
//                   writes into the supervisor's segment (the header, a ledger row, another
//                   slot's participant record, the supervisor's half of its own incoming
//                   ring): the write must fault here, in this process alone
//   write-device-total  writes over the simulated device's total in the segment header
//   write-device-use    writes over the simulated device's use, where its accounting is
//                   published (the whole device claimed, for everyone)
//   census-garbage  leaves its own census mid-write (an odd sequence)
//   ring-garbage    moves its own outgoing ring's head more than a lap ahead, then idles
//   escape          starts two processes that leave its process group, each keeping every
//                   descriptor it has (the segment's, its region's, the doorbell): a child
//                   that calls setsid(), and a daemon (setsid() and a second fork, its parent
//                   gone at once); says "escaped: setsid child PID, daemon PID" and idles.
//                   Both must end when this worker's life ends
//   With --when-signalled a hostile mode does its misdeed at SIGUSR1 instead of 200 ms
//   after its Hello, so that the soak chooses when.
// Receipt mode:
//   receipt-liar    after its Hello, 200 release receipts (full_release) and 16,400 unload
//                   receipts that nothing asked for, each claiming 1 PiB freed (enough to
//                   wrap a 64-bit sum); then it answers every release and eviction it is
//                   asked for with 1 PiB freed
// Deaf modes:
//   deaf            says Hello, loads one model of 512 MiB (admitted, allocated and reported
//                   as the reference worker does), then keeps its heartbeat and never reads
//                   its ring again: every eviction, release and Shutdown goes unanswered,
//                   and the supervisor's answer time-outs must pass it over
//   deaf-filler COUNT  the same with COUNT models of 1 MiB (a ledger filler: the eviction
//                   order puts the smaller models first, so each would be waited on in turn)
// It maps what comfy-worker maps (worker/participant_memory.hpp).

#include "shared/message_codec.hpp"
#include "tests/support/deliberate_fault.hpp"
#include "worker/participant_memory.hpp"
#include "worker/worker_runtime.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

using namespace comfy;

constexpr std::uint64_t kFlood = 20'000;

// Waits while the ring is full: a flood must get through, however slowly it is read.
void push(ipc::RingProducer<MessageSlot>& out, const MessageSlot& message) {
    while (out.try_push(message) == ipc::PushResult::full) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

// Whether a participant other than `slot` has a model in the ledger.
bool other_holds_a_model(const SegmentView& view, std::uint32_t slot) {
    for (std::uint32_t row = 0; row < view.capacities().ledger_entries; ++row) {
        LedgerRecord record{};
        if (view.ledger(row).entry.read(record) == ipc::SeqlockRead::ok && record.owner_generation != 0 &&
            record.owner_slot != slot) {
            return true;
        }
    }
    return false;
}

ModelRegistered model(std::uint64_t id, std::uint64_t bytes) { return ModelRegistered{id, id, bytes, bytes, 0, 0, 0, 0}; }

AdmissionRequest load_of(std::uint64_t bytes, std::uint32_t keep) {
    AdmissionRequest request{};
    request.streams = 1;
    request.bytes = bytes;
    request.keep_loaded_count = keep;
    return request;
}

// Keeps the heartbeat going so that only the mode's misdeed can get this worker stopped.
void beat_forever(CensusSlot& census) {
    std::thread([&census] {
        for (std::uint64_t beat = 1;; ++beat) {
            // Relaxed: as the real heartbeat.
            census.heartbeat.store(beat, std::memory_order_relaxed);
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }).detach();
}

bool hostile_write(const std::string& mode, const worker::ParticipantMemory& memory, std::uint32_t slot) {
    const SegmentView& view = memory.view;
    if (mode == "write-header") {
        test::write_expecting_fault(memory.segment.base());
    } else if (mode == "write-device-total") {
        test::write_expecting_fault(memory.segment.base() + 64 + offsetof(LayoutHeader, device_total_bytes));
    } else if (mode == "write-ledger") {
        test::write_expecting_fault(&view.ledger(0));
    } else if (mode == "write-participant") {
        test::write_expecting_fault(&view.participant((slot + 1) % view.capacities().participants));
    } else if (mode == "write-ring-half") {
        test::write_expecting_fault(view.to_participant_producer_side(slot));
    } else if (mode == "write-device-use") {
        test::write_expecting_fault(&view.device().used_bytes);
    } else {
        return false;
    }
    return true;
}

// Sleeps until killed. In a child forked from a process with threads only async-signal-safe
// calls may run, and this makes none.
[[noreturn]] void pause_forever() {
    for (;;) ::pause();
}

// The escape mode's misdeed: two processes outside this worker's process group, holding
// its descriptors. Returns false when a fork fails.
bool escape() {
    const pid_t setsid_child = ::fork();
    if (setsid_child == 0) {
        ::setsid();
        pause_forever();
    }
    int report[2];
    if (setsid_child < 0 || ::pipe(report) != 0) return false;
    const pid_t middle = ::fork();
    if (middle == 0) {
        ::setsid();
        const pid_t daemon = ::fork();
        if (daemon == 0) pause_forever();
        [[maybe_unused]] const auto n = ::write(report[1], &daemon, sizeof daemon);
        ::_exit(0);
    }
    pid_t daemon = -1;
    if (middle > 0 && ::read(report[0], &daemon, sizeof daemon) != static_cast<ssize_t>(sizeof daemon)) daemon = -1;
    if (middle > 0) ::waitpid(middle, nullptr, 0);
    ::close(report[0]);
    ::close(report[1]);
    std::fprintf(stderr, "misbehaving-worker: escaped: setsid child %d, daemon %d\n", static_cast<int>(setsid_child),
                 static_cast<int>(daemon));
    return daemon > 0;
}

// Holds `models` models of `model_bytes` each through the real runtime (one admission for
// them all, as a pack loading them at start-up), then stops listening for good. The models
// are registered before their bytes are allocated: the allocation is asked on the same ring,
// after them, so whoever sees the device's free bytes fall (a test's await_free_below) finds
// every model in the ledger; allocated first, a loaded machine let another pack's eviction
// run over the first few rows alone.
[[noreturn]] void run_deaf(const worker::WorkerEnvironment& env, std::uint64_t models, std::uint64_t model_bytes) {
    worker::WorkerRuntime runtime(env, 0);
    AdmissionRequest request{};
    request.streams = 1;
    request.bytes = models * model_bytes;
    request.largest_tensor = model_bytes / 8;
    if (runtime.request_admission(request, {}).granted) {
        const auto kind = static_cast<std::uint16_t>(ModelKind::diffusion);
        for (std::uint64_t id = 1; id <= models; ++id) {
            runtime.send(encode(ModelRegistered{id, id, model_bytes, model_bytes, 0, kind, 0, 0}, env.generation));
            runtime.send(encode(ResidencyReceipt{id, 1, model_bytes, 1, 0, 1, {}}, env.generation));
        }
        if (!runtime.device().allocate(request.bytes)) {
            std::fprintf(stderr, "misbehaving-worker: the device refused the %llu bytes its admission granted\n",
                         static_cast<unsigned long long>(request.bytes));
        }
    }
    std::fprintf(stderr, "misbehaving-worker: deaf from now on\n");
    for (;;) ::pause();  // the heartbeat thread beats on; the supervisor ends us
}

// COUNT of deaf-filler: 1 to a million models (the most a ledger holds).
std::uint64_t filler_count(const char* text) {
    char* end = nullptr;
    const unsigned long long count = std::strtoull(text, &end, 10);
    if (end == text || *end != '\0' || count < 1 || count > 1'048'576) {
        std::fprintf(stderr, "misbehaving-worker: deaf-filler wants a count of models from 1 to 1048576, found %s\n", text);
        std::exit(2);
    }
    return count;
}

// Counts what nobody asked for, then answers what it is asked with more than any device has.
[[noreturn]] void run_receipt_liar(const worker::WorkerEnvironment& env) {
    worker::WorkerRuntime runtime(env, 0);
    constexpr std::uint64_t kUnaskedReleases = 200;
    constexpr std::uint64_t kUnaskedUnloads = 16'400;  // 16,384 PiB is 2^64 bytes
    for (std::uint64_t n = 0; n < kUnaskedReleases; ++n) {
        runtime.send(encode(ReleaseReceipt{static_cast<std::uint16_t>(MessageType::full_release), 0, {}, 0, kMaxBytes},
                            env.generation));
    }
    for (std::uint64_t n = 0; n < kUnaskedUnloads; ++n) {
        runtime.send(encode(UnloadReceipt{n + 1, kMaxBytes, kMaxBytes, 1, 0, 0, {}}, env.generation));
    }
    std::fprintf(stderr, "misbehaving-worker: unasked receipts sent\n");
    for (;;) {
        const auto command = runtime.next_command(std::chrono::hours(1));
        if (!command) continue;
        if (command->type() == MessageType::shutdown) ::_exit(0);
        if (is_release(command->type())) {
            runtime.send(encode(ReleaseReceipt{command->header.type, 0, {}, 0, kMaxBytes}, env.generation,
                                command->header.correlation));
        } else if (is_eviction(command->type())) {
            const std::uint64_t model_id = command->type() == MessageType::detach
                                               ? std::get<Detach>(command->payload).model_id
                                               : std::get<PartialUnload>(command->payload).model_id;
            runtime.send(encode(UnloadReceipt{model_id, kMaxBytes, kMaxBytes, 1, 0, 0, {}}, env.generation,
                                command->header.correlation));
        }
    }
}

}  // namespace

int main(int argc, char* argv[]) {
    const bool when_signalled = argc == 3 && std::string(argv[2]) == "--when-signalled";
    const bool filler = argc == 3 && std::string(argv[1]) == "deaf-filler";
    if (argc != 2 && !when_signalled && !filler) {
        std::fprintf(stderr, "usage: misbehaving-worker MODE [--when-signalled] (see the source for the modes)\n");
        return 2;
    }
    const std::string mode = argv[1];
    // Blocked before any thread starts, so that only sigwait below takes it.
    sigset_t trigger;
    sigemptyset(&trigger);
    sigaddset(&trigger, SIGUSR1);
    if (when_signalled) ::sigprocmask(SIG_BLOCK, &trigger, nullptr);
    const auto env = worker::WorkerEnvironment::from_process_environment();
    if (mode == "deaf") run_deaf(env, 1, std::uint64_t{512} << 20);
    if (filler) run_deaf(env, filler_count(argv[2]), std::uint64_t{1} << 20);
    if (mode == "receipt-liar") run_receipt_liar(env);
    worker::ParticipantMemory memory(env);
    ipc::EventFd doorbell(env.doorbell_fd);
    ipc::RingProducer<MessageSlot> out(memory.outbound(), memory.view.capacities().ring_slots, &doorbell);

    Hello hello{};
    hello.pid = ::getpid();
    hello.layout_version = kLayoutVersion;
    std::copy(env.token.begin(), env.token.end(), hello.token);
    if (mode == "wrong-token") {
        hello.token[0] ^= 1;
        out.try_push(encode(hello, env.generation));
    } else if (mode == "wrong-version") {
        hello.layout_version = kLayoutVersion + 1;
        out.try_push(encode(hello, env.generation));
    } else if (mode == "early-message") {
        out.try_push(encode(NodeStarted{1, 0, 0}, env.generation));
    } else if (mode == "keep-mismatch") {
        out.try_push(encode(hello, env.generation));
        AdmissionKeep keep{};
        keep.count = 2;
        keep.keys[0] = machine_model_key(env.slot, 1);
        keep.keys[1] = machine_model_key(env.slot, 2);
        out.try_push(encode(keep, env.generation, 7));
        AdmissionRequest request{};
        request.streams = 1;
        request.bytes = 1 << 20;
        request.keep_loaded_count = 3;
        out.try_push(encode(request, env.generation, 7));
    } else if (mode == "standin-unload") {
        out.try_push(encode(hello, env.generation));
        StandInUnload unload{};
        unload.owner_generation = 1;
        unload.model_id = 1;
        unload.detach = 1;
        out.try_push(encode(unload, env.generation, 7));
    } else if (mode == "ready-unasked") {
        out.try_push(encode(hello, env.generation));
        out.try_push(encode(Ready{kNodeClassesUncounted, 0}, env.generation));
    } else if (mode == "ready-twice" || mode == "early-node" || mode == "never-ready") {
        hello.capabilities = kCapReadyLater;
        out.try_push(encode(hello, env.generation));
        if (mode == "ready-twice") {
            out.try_push(encode(Ready{kNodeClassesUncounted, 0}, env.generation));
            out.try_push(encode(Ready{kNodeClassesUncounted, 0}, env.generation));
        } else if (mode == "early-node") {
            out.try_push(encode(NodeStarted{1, 0, 0}, env.generation));
        } else {
            beat_forever(memory.own.census());
        }
    } else if (mode == "admission-flood") {
        push(out, encode(hello, env.generation));
        while (!other_holds_a_model(memory.view, env.slot)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        // The first load does not fit: the supervisor asks us, first, to free our own model,
        // and waits for the answer that never comes. The rest keep that model and queue.
        constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
        push(out, encode(model(1, kGiB), env.generation));
        push(out, encode(load_of(30 * kGiB, 0), env.generation, 1));
        AdmissionKeep keep{};
        keep.count = 1;
        keep.keys[0] = machine_model_key(env.slot, 1);
        for (std::uint64_t correlation = 2; correlation <= kFlood; ++correlation) {
            push(out, encode(keep, env.generation, correlation));
            push(out, encode(load_of(30 * kGiB, 1), env.generation, correlation));
        }
    } else if (mode == "answer-flood") {
        push(out, encode(hello, env.generation));
        for (std::uint64_t correlation = 1; correlation <= kFlood; ++correlation) {
            if (correlation % 2 == 0) {
                push(out, encode(PinRequest{std::uint64_t{1} << 20}, env.generation, correlation));
            } else {
                push(out, encode(load_of(std::uint64_t{1} << 20, 0), env.generation, correlation));
            }
        }
    } else if (mode == "node-flood") {
        hello.capabilities = kCapNodeBoundaryRelease;
        push(out, encode(hello, env.generation));
        for (std::uint32_t node = 0; node < kFlood; ++node) {
            push(out, encode(NodeStarted{1, node, 0}, env.generation));
            push(out, encode(NodeFinished{1, node, 0}, env.generation));
        }
    } else if (mode == "ledger-flood") {
        push(out, encode(hello, env.generation));
        for (std::uint64_t id = 1; id <= kFlood; ++id) push(out, encode(model(id, std::uint64_t{1} << 20), env.generation));
    } else {
        out.try_push(encode(hello, env.generation));
        beat_forever(memory.own.census());
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // past the Hello, ready
        int signal = 0;
        if (when_signalled) ::sigwait(&trigger, &signal);
        if (mode == "census-garbage") {
            // Relaxed: the misdeed itself; an odd sequence reads as mid-write forever.
            reinterpret_cast<std::atomic<std::uint32_t>&>(memory.own.census().census).store(
                3, std::memory_order_relaxed);
        } else if (mode == "ring-garbage") {
            auto* side = static_cast<ipc::RingProducerSide*>(memory.outbound().producer_side);
            // Relaxed: as above; more than a lap ahead of anything the supervisor read.
            side->head.store(std::uint64_t{1} << 40, std::memory_order_relaxed);
        } else if (mode == "escape") {
            if (!escape()) std::fprintf(stderr, "misbehaving-worker: escape: fork failed\n");
        } else if (!hostile_write(mode, memory, env.slot)) {
            std::fprintf(stderr, "misbehaving-worker: unknown mode %s\n", mode.c_str());
            return 2;
        }
        std::fprintf(stderr, "misbehaving-worker: %s done and still alive\n", mode.c_str());
    }
    for (;;) ::pause();  // the supervisor ends us
}
