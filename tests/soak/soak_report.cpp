#include "tests/soak/soak_report.hpp"

#include "tests/soak/soak_setup.hpp"

#include <cstdio>

namespace comfy::soak {

namespace {

std::string figure(const std::optional<std::uint64_t>& value, const char* unit) {
    return value ? std::to_string(*value) + unit : "?";
}

std::string counts(const std::map<std::string, unsigned>& by_kind) {
    std::string text;
    for (const auto& [kind, count] : by_kind) text += (text.empty() ? "" : ", ") + kind + " " + std::to_string(count);
    return text.empty() ? "none" : text;
}

nlohmann::json optional_json(const auto& value) { return value ? nlohmann::json(*value) : nlohmann::json(); }

}  // namespace

void print_text(const SoakReport& r) {
    std::printf("soak: %u s asked, %.0f s run, seed %llu\n", r.seconds, r.elapsed, static_cast<unsigned long long>(r.seed));
    std::printf("  prompts done       %u (%u failed: %u cut short by the final SIGTERM); %u more done under "
                "supervisors killed by the soak\n",
                r.prompts_done, r.prompts_failed, r.prompts_failed_at_shutdown, r.prompts_done_uncounted);
    unsigned total = 0;
    for (const auto& [kind, count] : r.faults) total += count;
    std::printf("  faults             %u: %s\n", total, counts(r.faults).c_str());
    if (!r.skipped.empty()) std::printf("  faults skipped     %s\n", counts(r.skipped).c_str());
    std::printf("  admissions         %llu asked, %llu answered, %llu withdrawn with their dead asker\n",
                static_cast<unsigned long long>(r.admissions_asked), static_cast<unsigned long long>(r.admissions_answered),
                static_cast<unsigned long long>(r.admissions_withdrawn));
    std::printf("  ledger checks      %u of %u passed (after each recovery)\n", r.ledger_checks_passed, r.ledger_checks);
    const auto deaf_pack = r.found_deaf.find(kDeafPack);
    std::printf("  deaf pack          found deaf %u time(s), after %u answer time-out(s): one a life at most\n",
                deaf_pack == r.found_deaf.end() ? 0 : deaf_pack->second, r.deaf_pack_timeouts);
    std::printf("  found deaf         %s\n", counts(r.found_deaf).c_str());
    std::printf("  stale segments     %u removed by the next supervisor\n", r.stale_segments_removed);
    std::printf("  machine stalls     %u (longest %.1f s); %u participant(s) found hung in them\n", r.stalls,
                r.longest_stall, r.stall_deaths);
    for (const auto& life : r.lives) {
        std::printf("  supervisor %d       %.0f s, ended by %s: RSS %s -> %s, descriptors %s -> %s\n", life.life,
                    life.seconds, life.ended_by.c_str(), figure(life.rss_start_kib, " KiB").c_str(),
                    figure(life.rss_end_kib, " KiB").c_str(), figure(life.fds_start, "").c_str(),
                    figure(life.fds_end, "").c_str());
    }
    std::printf("  left behind        %s\n", r.leftovers.empty() ? "nothing" : std::to_string(r.leftovers.size()).c_str());
    for (const auto& line : r.leftovers) std::printf("    %s\n", line.c_str());
    if (r.breaches.empty()) {
        std::printf("soak: no breach\n");
    } else {
        std::printf("soak: %zu breach(es):\n", r.breaches.size());
        for (const auto& line : r.breaches) std::printf("  %s\n", line.c_str());
    }
    if (!r.logs.empty()) std::printf("soak: the supervisors' logs are in %s\n", r.logs.c_str());
}

nlohmann::json to_json(const SoakReport& r) {
    nlohmann::json lives = nlohmann::json::array();
    for (const auto& life : r.lives) {
        lives.push_back({{"life", life.life}, {"seconds", life.seconds}, {"ended_by", life.ended_by},
                         {"rss_start_kib", optional_json(life.rss_start_kib)}, {"rss_end_kib", optional_json(life.rss_end_kib)},
                         {"fds_start", optional_json(life.fds_start)}, {"fds_end", optional_json(life.fds_end)}});
    }
    return {{"seed", r.seed},
            {"seconds", r.seconds},
            {"elapsed", r.elapsed},
            {"prompts", {{"done", r.prompts_done}, {"failed", r.prompts_failed},
                         {"failed_at_shutdown", r.prompts_failed_at_shutdown},
                         {"done_under_killed_supervisors", r.prompts_done_uncounted}}},
            {"faults", r.faults},
            {"faults_skipped", r.skipped},
            {"admissions", {{"asked", r.admissions_asked}, {"answered", r.admissions_answered},
                            {"withdrawn", r.admissions_withdrawn}}},
            {"ledger_checks", {{"run", r.ledger_checks}, {"passed", r.ledger_checks_passed}}},
            {"found_deaf", r.found_deaf},
            {"deaf_pack_answer_timeouts", r.deaf_pack_timeouts},
            {"stale_segments_removed", r.stale_segments_removed},
            {"machine_stalls", {{"count", r.stalls}, {"longest_seconds", r.longest_stall}, {"hung_in_them", r.stall_deaths}}},
            {"supervisors", lives},
            {"leftovers", r.leftovers},
            {"breaches", r.breaches},
            {"logs", r.logs.empty() ? nlohmann::json() : nlohmann::json(r.logs)}};
}

}  // namespace comfy::soak
