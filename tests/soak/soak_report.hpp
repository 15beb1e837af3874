#pragma once
// What a soak found: its figures and every breach, printed as text or as one JSON object.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace comfy::soak {

// One supervisor from start to end: what it cost at its start and at its end.
struct LifeFigures {
    int life = 0;
    double seconds = 0;
    std::string ended_by;  // "SIGTERM" or "SIGKILL"
    std::optional<std::uint64_t> rss_start_kib, rss_end_kib;
    std::optional<std::size_t> fds_start, fds_end;
};

struct SoakReport {
    std::uint64_t seed = 0;
    unsigned seconds = 0;
    double elapsed = 0;
    std::uint32_t prompts_done = 0;
    std::uint32_t prompts_failed = 0;              // all of them, for whatever reason
    std::uint32_t prompts_failed_at_shutdown = 0;  // of those: cut short by the soak's SIGTERM
    std::uint32_t prompts_done_uncounted = 0;      // done in lives ended by SIGKILL, from their progress lines
    std::map<std::string, unsigned> faults;        // by kind ("hostile write-ledger", ...)
    std::map<std::string, unsigned> skipped;       // faults that found nothing to hit, by kind
    std::uint64_t admissions_asked = 0;
    std::uint64_t admissions_answered = 0;    // granted and refused
    std::uint64_t admissions_withdrawn = 0;   // dropped: the asker died first
    unsigned ledger_checks = 0;
    unsigned ledger_checks_passed = 0;
    unsigned stale_segments_removed = 0;
    // Participants found deaf, by name (the deaf pack once a life; others while stopped),
    // and the answer time-outs the deaf pack cost: one a life, never more.
    std::map<std::string, unsigned> found_deaf;
    unsigned deaf_pack_timeouts = 0;
    unsigned stalls = 0;          // times the machine did not run the soak for a while
    double longest_stall = 0;     // seconds
    unsigned stall_deaths = 0;    // participants found hung (or late) while the machine stalled
    std::vector<LifeFigures> lives;
    std::vector<std::string> leftovers;
    std::vector<std::string> breaches;
    std::string logs;  // where the supervisors' logs are kept, when they are
};

void print_text(const SoakReport& report);
nlohmann::json to_json(const SoakReport& report);

}  // namespace comfy::soak
