#include "supervisor/ops/health.hpp"

#include "supervisor/ctl/segment_report.hpp"

#include <nlohmann/json.hpp>

namespace comfy::supervisor {

Readiness readiness_of(const std::vector<std::unique_ptr<WorkerProcess>>& workers, bool shutting_down) {
    Readiness readiness;
    readiness.shutting_down = shutting_down;
    readiness.participants = workers.size();
    for (const auto& worker : workers) {
        if (worker->up()) {
            ++readiness.up;
            continue;
        }
        // ComfyUI is what a probe's traffic is for: failed or stopped, it is not ready.
        const bool waits_for_operator =
            worker->state == ParticipantState::failed || worker->state == ParticipantState::stopped;
        if (worker->kind == ParticipantKind::host || !waits_for_operator) {
            readiness.waiting.push_back({worker->pack.name, worker->state});
        }
    }
    return readiness;
}

std::string readiness_text(const Readiness& readiness) {
    std::string text = std::to_string(readiness.up) + " of " + std::to_string(readiness.participants) + " participants up";
    if (readiness.shutting_down) text += "; shutting down";
    for (std::size_t i = 0; i < readiness.waiting.size(); ++i) {
        const auto& waiting = readiness.waiting[i];
        text += (i == 0 ? "; waiting for " : ", ") + waiting.name + " (" +
                ctl::state_name(static_cast<std::uint8_t>(waiting.state)) + ")";
    }
    return text;
}

std::string readiness_json(const Readiness& readiness) {
    nlohmann::ordered_json waiting = nlohmann::ordered_json::array();
    for (const auto& [name, state] : readiness.waiting) {
        waiting.push_back({{"name", name}, {"state", ctl::state_name(static_cast<std::uint8_t>(state))}});
    }
    return nlohmann::ordered_json{{"ready", readiness.ready()},
                                  {"shutting_down", readiness.shutting_down},
                                  {"participants", readiness.participants},
                                  {"up", readiness.up},
                                  {"waiting", std::move(waiting)}}
               .dump() +
           "\n";
}

}  // namespace comfy::supervisor
