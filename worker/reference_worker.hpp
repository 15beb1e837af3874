#pragma once
// The reference worker: runs a PackDescription's nodes on the device through the worker
// runtime, exactly as a real worker would: it asks admission before every load, reports
// its models and their residency to the ledger, holds what its compute steps leave
// behind (cast buffers, patch pins) until a release frees it, answers evictions and
// releases with the bytes it really freed, and keeps its census.

#include "shared/memory_arithmetic.hpp"
#include "worker/node_leftovers.hpp"
#include "worker/pack_description.hpp"
#include "worker/worker_runtime.hpp"

#include <map>
#include <string>
#include <vector>

namespace comfy::worker {

class ReferenceWorker final : public CommandHandler {
public:
    ReferenceWorker(WorkerRuntime& runtime, PackDescription pack);
    void on_command(const Message& command) override;

private:
    struct HeldModel {
        std::string name;
        Bytes total = 0;
        Bytes loaded = 0;
        std::uint64_t sequence = 0;
        std::uint64_t evicted_in_epoch = 0;  // for churn: evicted again within one epoch
    };

    void run_work(const WorkRequest& work, std::uint64_t correlation);
    // Runs one node; false (with the reason logged) when a step failed.
    bool run_node(const std::string& name);
    bool run_step(const Step& step);
    // Grows the running node's cast buffer and patch pins to what `step` needs; false
    // (with the reason logged) when the device has no room for the buffer.
    bool hold_leftovers(const Step& step);
    // Gives back what releases took from the leftovers; returns the device bytes freed.
    Bytes free_leftovers(NodeLeftovers::Held taken);
    // Host memory pinned by pin steps, not counting the patch pins.
    Bytes pinned_by_steps();
    bool load_model(const std::string& name, Bytes bytes);
    void drop_model(std::uint64_t id);
    // Frees up to `bytes` of one model; returns what was really freed.
    Bytes unload(std::uint64_t id, Bytes bytes);
    Bytes unload_everything();
    void answer_unload(const Message& command);
    void answer_release(const Message& command);
    // `just_used`: a load just used it, so it moves to the front of the eviction order.
    void report_residency(std::uint64_t id, bool just_used = false);
    // The model's next report sequence (residency and unload receipts share it); 0 for a
    // model not held.
    std::uint64_t next_sequence(std::uint64_t id);
    Bytes loaded_now(std::uint64_t id) const;
    void publish_census();

    WorkerRuntime& runtime_;
    PackDescription pack_;
    std::map<std::uint64_t, HeldModel> models_;  // by model id
    NodeLeftovers leftovers_;
    std::uint64_t next_model_id_ = 1;
    std::uint64_t prompt_epoch_ = 0;
    std::uint32_t last_node_ = 0;
};

}  // namespace comfy::worker
