#include "supervisor/lifecycle/liveness.hpp"

namespace comfy::supervisor {

std::optional<std::string> heartbeat_problem(WorkerProcess& worker, std::chrono::steady_clock::time_point now,
                                             std::chrono::milliseconds timeout) {
    // Relaxed: only compared with the previous value; a change is all that matters.
    const std::uint64_t beat = worker.region_view.census().heartbeat.load(std::memory_order_relaxed);
    if (beat != worker.last_heartbeat) {
        worker.last_heartbeat = beat;
        worker.heartbeat_seen_at = now;
        return std::nullopt;
    }
    if (now - worker.heartbeat_seen_at <= timeout) return std::nullopt;
    return "hung: no heartbeat for " + std::to_string(timeout.count()) + " ms";
}

std::optional<std::string> shared_memory_problem(WorkerProcess& worker, CensusStatus status) {
    // Polling only reads the producer's index and validates it.
    if (worker.from_worker->poll() == ipc::PopResult::corrupt) return "its ring to the supervisor is corrupt";
    // A census mid-write at one check may be a write in progress; at two in a row, or with
    // figures no machine has, or another life's generation in a region made for this one,
    // its writer is not writing what it means. Until then its figures are unknown (not
    // believed), which costs this worker alone.
    const bool bad = status == CensusStatus::unreadable || status == CensusStatus::stale;
    worker.census_problems = bad ? worker.census_problems + 1 : 0;
    if (worker.census_problems < 2) return std::nullopt;
    return std::string("its census is ") + (status == CensusStatus::stale ? "of another generation" : "unreadable") +
           " at two heartbeat checks in a row";
}

}  // namespace comfy::supervisor
