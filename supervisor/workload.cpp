#include "supervisor/workload.hpp"

#include "shared/json_errors.hpp"
#include "supervisor/log.hpp"

#include <boost/asio/post.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

namespace comfy::supervisor {

namespace {

using nlohmann::json;
constexpr std::uint32_t kMaxAttempts = 3;  // a node survives two worker deaths

[[noreturn]] void fail(const std::string& file, const std::string& path, const std::string& expected,
                       const json& found) {
    throw ConfigError(json_value_error_message(file, path, expected, found));
}

// Why the supervisor could not run a node, for the one line that fails its prompt.
std::string why_not_run(const RequestFailed& failed) {
    switch (static_cast<FailureReason>(failed.reason)) {
        case FailureReason::worker_died:
            return "its worker died at each of " + std::to_string(kMaxAttempts) + " attempts";
        case FailureReason::worker_failed: return "its pack is failed after too many restarts (comfyctl retry)";
        case FailureReason::shutting_down: return "the supervisor is shutting down";
        case FailureReason::no_such_pack: return "no such pack";
    }
    return "reason " + std::to_string(failed.reason);
}

}  // namespace

Workload load_workload(const std::string& path, const Config& config) {
    json document;
    try {
        document = read_json_file(path);
    } catch (const JsonFileError& error) {
        throw ConfigError(error.what());
    }
    if (!document.is_object()) fail(path, "/", "an object with \"prompts\"", document);
    Workload workload;
    for (const auto& [key, value] : document.items()) {
        if (key == "repeat") {
            if (!value.is_number_unsigned() || value.get<std::uint64_t>() < 1 || value.get<std::uint64_t>() > 100000) {
                fail(path, "/repeat", "a whole number from 1 to 100000", value);
            }
            workload.repeat = value.get<std::uint32_t>();
        } else if (key == "parallel") {
            if (!value.is_boolean()) fail(path, "/parallel", "true or false", value);
            workload.parallel = value.get<bool>();
        } else if (key != "prompts") {
            fail(path, "/" + key, "one of prompts, repeat, parallel", json(key));
        }
    }
    constexpr const char* kPromptsExpected = "a non-empty array of prompts";
    if (!document.contains("prompts")) {
        throw ConfigError(json_error_message(path, "/prompts", kPromptsExpected, kFoundNothing));
    }
    const json& prompts = document.at("prompts");
    if (!prompts.is_array() || prompts.empty()) fail(path, "/prompts", kPromptsExpected, prompts);
    for (std::size_t p = 0; p < prompts.size(); ++p) {
        const std::string prompt_path = "/prompts/" + std::to_string(p);
        if (!prompts[p].is_array() || prompts[p].empty()) fail(path, prompt_path, "a non-empty array of nodes", prompts[p]);
        auto& nodes = workload.prompts.emplace_back();
        for (std::size_t n = 0; n < prompts[p].size(); ++n) {
            const std::string node_path = prompt_path + "/" + std::to_string(n);
            const json& node = prompts[p][n];
            if (!node.is_object() || node.size() != 2 || !node.contains("pack") || !node.contains("node") ||
                !node["pack"].is_string() || !node["node"].is_string()) {
                fail(path, node_path, "{\"pack\": NAME, \"node\": NAME}", node);
            }
            const auto pack = node["pack"].get<std::string>();
            const bool known = std::any_of(config.packs.begin(), config.packs.end(),
                                           [&](const PackConfig& c) { return c.name == pack; });
            if (!known) fail(path, node_path + "/pack", "a pack named in " + config.source, node["pack"]);
            nodes.push_back({pack, node["node"].get<std::string>()});
        }
    }
    return workload;
}

WorkloadRunner::WorkloadRunner(Supervisor& supervisor, Workload workload)
    : supervisor_(supervisor), workload_(std::move(workload)) {}

std::uint32_t WorkloadRunner::prompts_total() const noexcept {
    return static_cast<std::uint32_t>(workload_.prompts.size()) * workload_.repeat;
}

void WorkloadRunner::start() {
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
            log_line(name + ": node " + node.node + " failed in its worker");
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
        log_line(name + ": worker of " + node.pack + " died during " + node.node + "; retrying on its replacement");
        // Post, so the retry is queued after the death is fully handled.
        boost::asio::post(supervisor_.io(), [this, prompt] { run_node(running_.at(prompt)); });
        return;
    }
    log_line(name + ": node " + node.node + " could not run: " + why_not_run(failed));
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
        supervisor_.begin_shutdown("workload finished");
        return;
    }
    start_next();
}

}  // namespace comfy::supervisor
