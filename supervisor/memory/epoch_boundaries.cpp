#include "supervisor/memory/epoch_boundaries.hpp"

namespace comfy::supervisor {

namespace {
// An idle worker is sent this many boundaries after its last node_started (the header says why two).
constexpr std::uint32_t kIdleBoundaries = 2;
}  // namespace

void EpochBoundaries::node_started(const WorkerProcess& worker) {
    concerned_[worker.slot] = Concerned{worker.generation, 0};
}

void EpochBoundaries::start_epoch(std::uint64_t epoch) {
    if (epoch <= epoch_) return;
    epoch_ = epoch;
    // Sent before the prompt's first node, so that node's worker frees them before it runs
    // (a busy worker finds the message at its next boundary).
    for (auto it = concerned_.begin(); it != concerned_.end();) {
        WorkerProcess* worker = workers_.live(it->first, it->second.generation);
        if (worker == nullptr || !worker->up()) {
            it = concerned_.erase(it);  // its life ended, and what it held went with it
            continue;
        }
        workers_.deliver(*worker, encode(CastEpochBoundary{epoch_}, worker->generation));
        const bool busy = worker->state == ParticipantState::busy;
        it->second.idle_boundaries = busy ? 0 : it->second.idle_boundaries + 1;
        it = it->second.idle_boundaries >= kIdleBoundaries ? concerned_.erase(it) : std::next(it);
    }
}

}  // namespace comfy::supervisor
