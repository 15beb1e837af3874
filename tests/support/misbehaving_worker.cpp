// A worker that breaks the protocol on purpose, for the supervisor's refusal tests:
//   misbehaving-worker wrong-token | wrong-version | early-message | keep-mismatch
//                      | admission-flood | answer-flood | node-flood | ledger-flood
// (keep-mismatch: after a good Hello, an admission that claims more kept models than
// its admission_keep messages named; admission-flood: once another pack holds a model,
// 20,000 admission requests that queue behind the eviction of a model of its own that it
// never answers; answer-flood: 20,000 small admission and pin requests, each answered
// at once, whose answers it never takes; node-flood: 20,000 nodes started and finished,
// asking for the release after each, which it never takes; ledger-flood: 20,000 models
// registered at once.)
// It attaches like comfy-worker, then sends what its mode says, never reads what comes
// back, and waits to be stopped.

#include "shared/message_codec.hpp"
#include "shared/segment_layout.hpp"
#include "worker/worker_environment.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
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

}  // namespace

int main(int argc, char* argv[]) {
    using namespace comfy;
    if (argc != 2) {
        std::fprintf(stderr, "usage: misbehaving-worker wrong-token|wrong-version|early-message|keep-mismatch|"
                             "admission-flood|answer-flood|node-flood|ledger-flood\n");
        return 2;
    }
    const std::string mode = argv[1];
    const auto env = worker::WorkerEnvironment::from_process_environment();
    auto segment = attach_segment(env.instance);
    const auto view = view_of(segment);
    ipc::EventFd doorbell(env.doorbell_fd);
    ipc::RingProducer<MessageSlot> out(view.from_participant_ring(env.slot), view.capacities().ring_slots, &doorbell);

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
    } else if (mode == "admission-flood") {
        push(out, encode(hello, env.generation));
        while (!other_holds_a_model(view, env.slot)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
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
        std::fprintf(stderr, "misbehaving-worker: unknown mode %s\n", mode.c_str());
        return 2;
    }
    for (;;) ::pause();  // the supervisor ends us
}
