#include "supervisor/memory/release_scheduler.hpp"

#include "shared/byte_size.hpp"
#include "supervisor/ops/log/log.hpp"

namespace comfy::supervisor {

using Clock = std::chrono::steady_clock;

ReleaseScheduler::ReleaseScheduler(const HostMemoryConfig& host, WorkerAccess& workers, CensusReader& census,
                                   MemoryBroker& memory, EventJournal& journal)
    : host_(host), workers_(workers), census_(census), memory_(memory), journal_(journal), epochs_(workers) {}

void ReleaseScheduler::node_started(const WorkerProcess& worker, std::uint64_t epoch) {
    epochs_.node_started(worker);
    epochs_.start_epoch(epoch);
}

void ReleaseScheduler::node_finished(WorkerProcess& worker, const NodeFinished& node) {
    worker.idle_since = Clock::now();
    worker.idle_released = false;
    // The release answers the node's end: one that piles up unread counts as outstanding.
    if ((worker.capabilities & kCapNodeBoundaryRelease) && memory_.may_ask(worker, MessageType::node_finished)) {
        workers_.deliver(worker, encode(ReleaseNodeBoundary{node.prompt_epoch, node.node_index, 0}, worker.generation));
    }
}

HostFigures ReleaseScheduler::host_figures() {
    const auto holdings = host_holdings();
    HostFigures figures{host_.budget_bytes, host_.low_water_bytes, std::nullopt, 0};
    for (const auto& holding : holdings) figures.pinned += holding.pinned;
    if (host_.budget_bytes > 0) {
        figures.available = host_available(holdings);
    } else if (const auto reading = read_host_memory()) {
        figures.available = reading->available;
    }
    return figures;
}

void ReleaseScheduler::tick() {
    sweep_idle_workers();
    relieve_host_pressure();
}

void ReleaseScheduler::answer_pin_request(WorkerProcess& worker, const Message& message) {
    const Bytes asked = std::get<PinRequest>(message.payload).bytes;
    const auto holdings = host_holdings();
    const Bytes available = host_available(holdings);
    const Bytes granted = pin_grant(asked, available, host_.low_water_bytes);
    if (granted < asked) {
        workers_.log_about(worker, "pin cuts",
                  worker.pack.name + ": pin of " + format_byte_size(asked) + " cut to " + format_byte_size(granted) +
                      ": host has " + format_byte_size(available) + " available, keeping " +
                      format_byte_size(host_.low_water_bytes) + " free");
        // Make room for the next try, as upstream's ensure_pin_budget frees pins first.
        relieve_host_pressure(asked - granted, holdings, available);
    }
    const Bytes left = available > granted ? available - granted : 0;
    workers_.deliver(worker, encode(PinGrant{granted, std::min(left, kMaxBytes)}, worker.generation, message.header.correlation));
}

std::vector<HostHolding> ReleaseScheduler::host_holdings() {
    census_.refresh();
    std::vector<HostHolding> holdings;
    for (const auto& [slot, census] : census_.believable()) {
        holdings.push_back({slot, census.generation, census.pinned_bytes, census.resident_set_bytes});
    }
    return holdings;
}

Bytes ReleaseScheduler::host_available(const std::vector<HostHolding>& holdings) const {
    // A configured budget stands for a memory limit that the participants' pins and
    // resident sets count against; otherwise the machine's own reading already has them.
    if (host_.budget_bytes > 0) return budget_left(host_.budget_bytes, holdings);
    const auto reading = read_host_memory();
    return reading ? reading->available : 0;
}

bool ReleaseScheduler::pin_release_recent(Clock::time_point now) const {
    return last_pin_release_ != Clock::time_point{} && now - last_pin_release_ < host_.pin_release_interval;
}

void ReleaseScheduler::relieve_host_pressure() {
    // The interval first: host memory is read only when a round could go out.
    if (pin_release_recent(Clock::now())) return;
    const auto holdings = host_holdings();
    const Bytes available = host_available(holdings);
    if (available >= host_.low_water_bytes) return;
    relieve_host_pressure(host_.low_water_bytes - available, holdings, available);
}

void ReleaseScheduler::relieve_host_pressure(Bytes deficit, const std::vector<HostHolding>& holdings, Bytes available) {
    const auto now = Clock::now();
    if (pin_release_recent(now)) return;
    const auto plan = plan_pin_releases(holdings, deficit);
    if (plan.empty()) return;
    last_pin_release_ = now;
    ++pin_release_rounds_;
    log_line("host memory: " + format_byte_size(available) + " available (low water " +
             format_byte_size(host_.low_water_bytes) + "); asking " + std::to_string(plan.size()) +
             " worker(s) to release " + format_byte_size(deficit) + " of pins in proportion");
    for (const auto& release : plan) {
        if (WorkerProcess* worker = workers_.live(release.holder.slot, release.holder.generation)) {
            workers_.deliver(*worker, encode(ReleasePins{release.bytes}, worker->generation));
        }
    }
}

void ReleaseScheduler::sweep_idle_workers() {
    if (host_.idle_release.count() == 0) return;
    const auto now = Clock::now();
    for (auto& worker : workers_.workers()) {
        if (worker->state != ParticipantState::ready || worker->idle_released) continue;
        if (now - worker->idle_since < host_.idle_release) continue;
        worker->idle_released = true;
        log_line(LogLevel::info,
                 worker->pack.name + ": idle for " + std::to_string(host_.idle_release.count()) +
                     " ms; asking it to release everything",
                 worker->log_fields("releases"));
        workers_.deliver(*worker, encode(FullRelease{static_cast<std::uint32_t>(FullReleaseReason::idle_sweep), 0},
                                worker->generation));
    }
}

void ReleaseScheduler::release_everything(FullReleaseReason reason) {
    log_line("operator asked for a full release: every idle worker releases everything");
    journal_.record("operator", "", "full release of every worker");
    for (auto& worker : workers_.workers()) {
        // Idle and busy workers both get it: a busy one reads the ring only between nodes,
        // so it finds the message at its next boundary.
        if (worker->up()) {
            workers_.deliver(*worker, encode(FullRelease{static_cast<std::uint32_t>(reason), 0}, worker->generation));
        }
    }
}

}  // namespace comfy::supervisor
