// comfy-worker: the reference worker. Started by comfy-supervisor, it runs the node pack
// described in a JSON file on the device, through the worker runtime.

#include "worker/reference_worker.hpp"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

namespace {

constexpr const char* kUsage = "usage: comfy-worker --pack FILE (started by comfy-supervisor)";

}  // namespace

int main(int argc, char* argv[]) {
    std::string pack_file;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--pack") == 0 && i + 1 < argc) {
            pack_file = argv[++i];
        } else if (std::strcmp(argv[i], "--help") == 0) {
            std::puts(kUsage);
            return 0;
        } else {
            std::fprintf(stderr, "comfy-worker: unexpected argument '%s'; %s\n", argv[i], kUsage);
            return 2;
        }
    }
    if (pack_file.empty()) {
        std::fprintf(stderr, "comfy-worker: no pack given; %s\n", kUsage);
        return 2;
    }
    try {
        auto pack = comfy::worker::load_pack_description(pack_file);
        const auto environment = comfy::worker::WorkerEnvironment::from_process_environment();
        const std::uint64_t capabilities =
            comfy::kCapPinnedMemory | (pack.node_boundary_release ? std::uint64_t{comfy::kCapNodeBoundaryRelease} : 0);
        comfy::worker::WorkerRuntime runtime(environment, capabilities);
        comfy::worker::ReferenceWorker worker(runtime, std::move(pack));
        runtime.serve(worker);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "comfy-worker: %s\n", e.what());
        return 2;
    }
}
