// A worker that breaks the protocol on purpose, for the supervisor's refusal tests:
//   misbehaving-worker wrong-token | wrong-version | early-message | keep-mismatch
// (keep-mismatch: after a good Hello, an admission that claims more kept models than
// its admission_keep messages named).
// It attaches like comfy-worker, then sends what its mode says and waits to be stopped.

#include "shared/message_codec.hpp"
#include "shared/segment_layout.hpp"
#include "worker/worker_environment.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

int main(int argc, char* argv[]) {
    using namespace comfy;
    if (argc != 2) {
        std::fprintf(stderr, "usage: misbehaving-worker wrong-token|wrong-version|early-message|keep-mismatch\n");
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
    } else {
        std::fprintf(stderr, "misbehaving-worker: unknown mode %s\n", mode.c_str());
        return 2;
    }
    for (;;) ::pause();  // the supervisor ends us
}
