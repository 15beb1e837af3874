#include "supervisor/ops/supervised.hpp"

namespace comfy::supervisor {

Totals totals_of(const MemoryBroker& memory, const ReleaseScheduler& releases,
                 const std::vector<std::unique_ptr<WorkerProcess>>& workers) {
    Totals totals;
    static_cast<MemoryTotals&>(totals) = memory.totals();
    totals.pin_release_rounds = releases.pin_release_rounds();
    totals.released = memory.released();
    totals.receipts_refused = memory.receipts_refused();
    totals.withdrawn = memory.arbiter().withdrawn();
    totals.unanswered = memory.arbiter().unanswered();
    totals.passed_over = memory.arbiter().deaf().passed_over_count();
    for (const auto& worker : workers) {
        totals.workers_started += worker->starts;
        totals.workers_restarted += worker->starts > 0 ? worker->starts - 1 : 0;
    }
    return totals;
}

std::vector<CensusRow> census_rows_of(const std::vector<std::unique_ptr<WorkerProcess>>& workers,
                                      const CensusReader& census) {
    std::vector<CensusRow> rows;
    for (const auto& worker : workers) {
        rows.push_back({worker->pack.name, worker->process.pid, worker->generation, worker->restarts.restarts(),
                        census.report(worker->slot).census});
    }
    return rows;
}

}  // namespace comfy::supervisor
