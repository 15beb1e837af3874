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
        } else if (key != "prompts") {
            fail(path, "/" + key, "one of prompts, repeat", json(key));
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
        log_line("every worker is up; running " + std::to_string(prompts_total()) + " prompt(s)");
        run_node();
    });
}

void WorkloadRunner::run_node() {
    const auto& prompt = workload_.prompts[prompt_ % workload_.prompts.size()];
    const auto& node = prompt[node_];
    ++attempts_;
    std::printf("prompt %u/%u  node %u/%zu  %s/%s%s\n", prompt_ + 1, prompts_total(), node_ + 1, prompt.size(),
                node.pack.c_str(), node.node.c_str(), attempts_ > 1 ? "  (retry)" : "");
    std::fflush(stdout);
    supervisor_.submit(node.pack, node.node, prompt_ + 1, node_, [this](const Message& reply) { on_reply(reply); });
}

void WorkloadRunner::on_reply(const Message& reply) {
    const auto& prompt = workload_.prompts[prompt_ % workload_.prompts.size()];
    if (const auto* result = std::get_if<WorkResult>(&reply.payload)) {
        if (result->status != static_cast<std::uint32_t>(WorkStatus::ok)) {
            log_line("prompt " + std::to_string(prompt_ + 1) + ": node " + prompt[node_].node + " failed in its worker");
            next_prompt(true);
            return;
        }
        ++outcome_.nodes_run;
        attempts_ = 0;
        if (++node_ == prompt.size()) {
            next_prompt(false);
        } else {
            run_node();
        }
        return;
    }
    const auto* failed = std::get_if<RequestFailed>(&reply.payload);
    const bool died = failed != nullptr && failed->reason == static_cast<std::uint32_t>(FailureReason::worker_died);
    if (died && attempts_ < kMaxAttempts) {
        ++outcome_.nodes_retried;
        log_line("prompt " + std::to_string(prompt_ + 1) + ": worker of " + prompt[node_].pack +
                 " died during " + prompt[node_].node + "; retrying on its replacement");
        // Post, so the retry is queued after the death is fully handled.
        boost::asio::post(supervisor_.io(), [this] { run_node(); });
        return;
    }
    log_line("prompt " + std::to_string(prompt_ + 1) + ": node " + prompt[node_].node + " could not run");
    next_prompt(true);
}

void WorkloadRunner::next_prompt(bool failed) {
    (failed ? outcome_.prompts_failed : outcome_.prompts_run) += 1;
    node_ = 0;
    attempts_ = 0;
    if (++prompt_ == prompts_total()) {
        final_census_ = supervisor_.census_rows();
        supervisor_.begin_shutdown("workload finished");
        return;
    }
    run_node();
}

}  // namespace comfy::supervisor
