#include "supervisor/ops/workload.hpp"

#include "supervisor/ops/log/log.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <cstdio>
#include <utility>

namespace comfy::supervisor {

namespace {

constexpr std::uint32_t kMaxAttempts = 3;  // a node survives two worker deaths

// Why the supervisor could not run a node, for the one line that fails its prompt.
std::string why_not_run(const RequestFailed& failed) {
    switch (static_cast<FailureReason>(failed.reason)) {
        case FailureReason::worker_died:
            return "its worker died at each of " + std::to_string(kMaxAttempts) + " attempts";
        case FailureReason::worker_failed: return "its pack is failed after too many restarts (comfyctl retry)";
        case FailureReason::shutting_down: return "the supervisor is shutting down";
        case FailureReason::no_such_pack: return "no such pack";
        case FailureReason::worker_stopped: return "its pack is stopped by an operator (comfyctl start)";
    }
    return "reason " + std::to_string(failed.reason);
}

// A prompt's line about the node of `pack` it ran, for the journal's fields.
LogFields about(const std::string& pack) {
    LogFields fields;
    fields.pack = pack;
    fields.event = "prompts";
    return fields;
}

}  // namespace

WorkloadRunner::WorkloadRunner(Supervised& supervisor, Workload workload)
    : supervisor_(supervisor), workload_(std::move(workload)) {}

std::uint32_t WorkloadRunner::prompts_total() const noexcept {
    return static_cast<std::uint32_t>(workload_.prompts.size()) * workload_.repeat;
}

void WorkloadRunner::start(std::function<void()> finished) {
    finished_ = std::move(finished);
    supervisor_.on_all_started([this] {
        log_line("every worker is up; running " + std::to_string(prompts_total()) + " prompt(s)" +
                 (workload_.parallel ? ", each round's prompts at once" : ""));
        start_next();
    });
}

// Starts the next prompt, or the next round of prompts when they run in parallel.
void WorkloadRunner::start_next() {
    const auto per_round = static_cast<std::uint32_t>(workload_.prompts.size());
    const std::uint32_t batch = workload_.parallel ? per_round : 1;
    for (std::uint32_t i = 0; i < batch && next_prompt_ < prompts_total(); ++i) {
        const std::uint32_t prompt = next_prompt_++;
        run_node(running_.emplace(prompt, Run{prompt}).first->second);
    }
}

const std::vector<WorkloadNode>& WorkloadRunner::nodes_of(const Run& run) const {
    return workload_.prompts[run.prompt % workload_.prompts.size()];
}

void WorkloadRunner::run_node(Run& run) {
    const auto& nodes = nodes_of(run);
    const auto& node = nodes[run.node];
    ++run.attempts;
    std::printf("prompt %u/%u  node %u/%zu  %s/%s%s\n", run.prompt + 1, prompts_total(), run.node + 1, nodes.size(),
                node.pack.c_str(), node.node.c_str(), run.attempts > 1 ? "  (retry)" : "");
    std::fflush(stdout);
    const std::uint32_t prompt = run.prompt;
    supervisor_.submit(node.pack, node.node, prompt + 1, run.node,
                       [this, prompt](const Message& reply) { on_reply(prompt, reply); });
}

void WorkloadRunner::on_reply(std::uint32_t prompt, const Message& reply) {
    Run& run = running_.at(prompt);
    const auto& node = nodes_of(run)[run.node];
    const std::string name = "prompt " + std::to_string(prompt + 1);
    if (const auto* result = std::get_if<WorkResult>(&reply.payload)) {
        if (result->status != static_cast<std::uint32_t>(WorkStatus::ok)) {
            log_line(LogLevel::info, name + ": node " + node.node + " failed in its worker", about(node.pack));
            finish(prompt, true);
            return;
        }
        ++outcome_.nodes_run;
        run.attempts = 0;
        if (++run.node == nodes_of(run).size()) {
            finish(prompt, false);
        } else {
            run_node(run);
        }
        return;
    }
    // The supervisor answers a request with the worker's WorkResult or with this.
    const auto& failed = std::get<RequestFailed>(reply.payload);
    const bool died = failed.reason == static_cast<std::uint32_t>(FailureReason::worker_died);
    if (died && run.attempts < kMaxAttempts) {
        ++outcome_.nodes_retried;
        log_line(LogLevel::info,
                 name + ": worker of " + node.pack + " died during " + node.node + "; retrying on its replacement",
                 about(node.pack));
        // Post, so the retry is queued after the death is fully handled.
        boost::asio::post(supervisor_.io(), [this, prompt] { run_node(running_.at(prompt)); });
        return;
    }
    log_line(LogLevel::info, name + ": node " + node.node + " could not run: " + why_not_run(failed), about(node.pack));
    finish(prompt, true);
}

void WorkloadRunner::finish(std::uint32_t prompt, bool failed) {
    (failed ? outcome_.prompts_failed : outcome_.prompts_run) += 1;
    running_.erase(prompt);
    if (!running_.empty()) return;  // the rest of this round is still running
    // Once shutdown has begun (a signal, or the last prompt), no prompt is started: each
    // would only fail at once, and from inside this call, one frame deeper per prompt.
    if (next_prompt_ == prompts_total() || supervisor_.shutting_down()) {
        final_census_ = supervisor_.census_rows();
        if (finished_ && !supervisor_.shutting_down()) {
            std::exchange(finished_, nullptr)();
        } else {
            supervisor_.begin_shutdown("workload finished");
        }
        return;
    }
    start_next();
}

}  // namespace comfy::supervisor
