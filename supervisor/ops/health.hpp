#pragma once
// Whether the supervisor is ready, as GET /readyz answers it (for Kubernetes' readiness
// probe and load balancers) and as systemd's STATUS tells it while the service starts:
// ready when the ComfyUI host, where one is configured, is up, and every pack's worker is
// up but those failed or stopped by the operator, which wait for an operator, not for
// time. Up is ready or busy (a participant running a node serves). Never ready once
// shutdown has begun. Alive (GET /healthz) needs no figure: the answer comes from the
// supervisor's own loop, so a loop that answers is alive.

#include "supervisor/lifecycle/worker_process.hpp"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace comfy::supervisor {

struct Readiness {
    struct Waiting {
        std::string name;  // the pack's, or "host"
        ParticipantState state;
    };
    std::vector<Waiting> waiting;  // who keeps it from being ready, in slot order
    std::size_t participants = 0;
    std::size_t up = 0;
    bool shutting_down = false;

    bool ready() const noexcept { return !shutting_down && waiting.empty(); }
};

Readiness readiness_of(const std::vector<std::unique_ptr<WorkerProcess>>& workers, bool shutting_down);

// One line: "2 of 3 participants up; waiting for host (spawning), beta (dead)".
std::string readiness_text(const Readiness& readiness);

// GET /readyz's body: {"ready", "shutting_down", "participants", "up", "waiting": [{"name", "state"}]}.
std::string readiness_json(const Readiness& readiness);

}  // namespace comfy::supervisor
