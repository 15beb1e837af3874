#pragma once
// The reference worker: runs a PackDescription's nodes on the device through the worker
// runtime, exactly as a real worker would (announce the node, act, answer the request).

#include "worker/pack_description.hpp"
#include "worker/worker_runtime.hpp"

#include <map>
#include <string>

namespace comfy::worker {

class ReferenceWorker final : public CommandHandler {
public:
    ReferenceWorker(WorkerRuntime& runtime, PackDescription pack);
    void on_command(const Message& command) override;

private:
    // Runs one node; false (with the reason logged) when a step failed.
    bool run_node(const std::string& name);
    bool run_step(const Step& step);
    void release_everything();
    void publish_census(std::uint64_t prompt_epoch, std::uint32_t node_index);

    WorkerRuntime& runtime_;
    PackDescription pack_;
    std::map<std::string, std::uint64_t> loaded_models_;  // name -> bytes on the device
};

}  // namespace comfy::worker
