#pragma once
// A workload of prompts to run through the workers: the stand-in for the ComfyUI host
// until it joins as a participant. Each prompt is a list of nodes, each node run by its
// pack's worker; a node whose worker died is retried on the restarted worker.

#include "supervisor/config/workload_file.hpp"
#include "supervisor/ops/supervised.hpp"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace comfy::supervisor {

class WorkloadRunner {
public:
    WorkloadRunner(Supervised& supervisor, Workload workload);
    // Starts once every worker is up. When the last prompt ends it calls `finished` if one
    // is given (the supervisor keeps running: `run --keep-running`), else shuts the
    // supervisor down.
    void start(std::function<void()> finished = nullptr);

    struct Outcome {
        std::uint32_t prompts_run = 0;
        std::uint32_t prompts_failed = 0;
        std::uint32_t nodes_run = 0;
        std::uint32_t nodes_retried = 0;
    };
    const Outcome& outcome() const noexcept { return outcome_; }
    // The workers' census as the last prompt ended, before shutdown released it all.
    const std::vector<CensusRow>& final_census() const noexcept { return final_census_; }
    std::uint32_t prompts_total() const noexcept;
    // Prompts started: all of them, unless the supervisor was shut down first.
    std::uint32_t prompts_started() const noexcept { return next_prompt_; }

private:
    // One prompt on its way through its nodes.
    struct Run {
        std::uint32_t prompt;  // over all repeats, from 0
        std::uint32_t node = 0;
        std::uint32_t attempts = 0;
    };

    void start_next();
    void run_node(Run& run);
    void on_reply(std::uint32_t prompt, const Message& reply);
    void finish(std::uint32_t prompt, bool failed);
    const std::vector<WorkloadNode>& nodes_of(const Run& run) const;

    Supervised& supervisor_;
    Workload workload_;
    Outcome outcome_;
    std::vector<CensusRow> final_census_;
    std::map<std::uint32_t, Run> running_;  // by prompt
    std::uint32_t next_prompt_ = 0;
    std::function<void()> finished_;
};

}  // namespace comfy::supervisor
