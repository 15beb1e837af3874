#include "supervisor/ops/summary.hpp"

#include "shared/byte_size.hpp"

#include <cstdio>
#include <string>

namespace comfy::supervisor {

void print_summary(const Totals& totals, Bytes device_total, const WorkloadRunner& runner) {
    const auto& outcome = runner.outcome();
    std::printf("\nsummary\n");
    std::printf("  prompts run        %u of %u (%u failed", outcome.prompts_run, runner.prompts_total(),
                outcome.prompts_failed);
    if (runner.prompts_started() < runner.prompts_total()) {
        std::printf(", %u not started: shut down first", runner.prompts_total() - runner.prompts_started());
    }
    std::printf(")\n");
    std::printf("  nodes run          %u (%u retried after a worker died)\n", outcome.nodes_run, outcome.nodes_retried);
    // The host, when configured, counts among the processes started.
    std::printf("  processes started  %u (%u restarts)\n", totals.workers_started, totals.workers_restarted);
    std::printf("  peak device use    %s of %s\n", format_byte_size(totals.peak_device_used).c_str(),
                format_byte_size(device_total).c_str());
    std::printf("  admissions         %u (%u granted short under policy admit, %u refused)\n", totals.admissions,
                totals.admitted_short, totals.refused);
    // Every admission asked is answered, or dropped with an asker that died before its answer.
    std::printf("  answered           %u granted, %u refused, %llu withdrawn (the asker left first), %llu unanswered\n",
                totals.granted, totals.refused, static_cast<unsigned long long>(totals.withdrawn),
                static_cast<unsigned long long>(totals.unanswered));
    std::printf("  evictions          %u asked of other participants, %s freed (measured by the owners)\n",
                totals.evictions_asked, format_byte_size(totals.bytes_evicted).c_str());
    std::printf("  deaf               %u time(s) a participant let a command go unanswered past the answer time-out; "
                "%llu eviction(s) passed over for it\n",
                totals.deaf_marked, static_cast<unsigned long long>(totals.passed_over));
    std::printf("  releases           %s freed by release messages, %u pin-release round(s)\n",
                format_byte_size(total_freed(totals.released)).c_str(), totals.pin_release_rounds);
    // By kind: the device bytes each kind gave back (host bytes unpinned for pins).
    std::printf("  freed by kind     ");
    for (std::size_t kind = 0; kind < kReleaseKindCount; ++kind) {
        const auto& count = totals.released[kind];
        std::printf("%s %s %s (%u)", kind == 0 ? "" : ",", std::string(to_string(static_cast<ReleaseKind>(kind))).c_str(),
                    format_byte_size(count.freed).c_str(), count.receipts);
    }
    std::printf("\n");
    std::printf("  receipts refused   %llu for nothing asked, %llu beyond what could be freed (counted up to it)\n",
                static_cast<unsigned long long>(totals.receipts_refused.unasked),
                static_cast<unsigned long long>(totals.receipts_refused.beyond_bound));
    std::printf("  census at the end of the workload:\n");
    std::printf("    %-12s %8s %4s %8s %12s %12s %12s %12s\n", "pack", "pid", "gen", "restarts", "device", "pinned", "rss",
                "cast bufs");
    for (const auto& row : runner.final_census()) {
        std::printf("    %-12s %8d %4u %8u %12s %12s %12s %12s\n", row.pack.c_str(), row.pid, row.generation,
                    row.restarts, format_byte_size(row.census.device_used_bytes).c_str(),
                    format_byte_size(row.census.pinned_bytes).c_str(),
                    format_byte_size(row.census.resident_set_bytes).c_str(),
                    format_byte_size(row.census.cast_buffer_bytes).c_str());
    }
    std::fflush(stdout);
}

}  // namespace comfy::supervisor
