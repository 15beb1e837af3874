// bench-arbitration: how long the arbiter takes to decide. Prints median and p99 of each
// figure, or one JSON object (--json).
//
//   decide_4096_us   the pure decision for one admission over a ledger of 4096 entries
//                    (68-69 models each for 60 owners, all idle, random sizes and
//                    residency): the request does not fit, so eviction_order runs over
//                    the whole ledger and the first owner is asked to free memory. Timed
//                    from handle(Admission) until its actions come back (one handle()
//                    call), each run on a fresh copy of the same prepared arbiter.
//
//   admit_evict8_us  one admission that needs eight evictions, end to end: the real
//                    supervisor loop and nine comfy-worker processes on the simulated
//                    device; from taking the request off the ring to sending the grant,
//                    the eight owners' receipts included (tests/bench/admit_evict8.cpp).
//
//   decide_siblings_p1024_l65536_us, owner_death_m8192_us
//                    the pure core at 1,024 participants and 65,536 ledger entries: a
//                    decision that asks the idle siblings for a partial release, and the
//                    death of an owner of 8,192 entries (tests/bench/arbiter_scale.cpp).
//
//   spawn_cpu_ratio_1023_vs_32
//                    the supervisor's CPU per spawned worker with 1,023 workers over that
//                    with 32, each pair measured in the same round, three rounds; the
//                    per-worker figures are reported too (spawn_cpu_per_worker_32_us,
//                    spawn_cpu_per_worker_1023_us; tests/bench/spawn_cpu.cpp).

#include "supervisor/arbiter/arbiter.hpp"
#include "tests/bench/admit_evict8.hpp"
#include "tests/bench/arbiter_scale.hpp"
#include "tests/bench/spawn_cpu.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using namespace comfy;
using namespace comfy::arbiter;

struct Percentiles {
    double p50;
    double p99;
};

// Nearest-rank percentiles of the samples.
Percentiles percentiles(std::vector<double> samples) {
    std::sort(samples.begin(), samples.end());
    const auto at = [&](double q) {
        const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(samples.size())));
        return samples[std::max<std::size_t>(rank, 1) - 1];
    };
    return {at(0.50), at(0.99)};
}

// One measured figure: its JSON key, the line it gets in the report, and its target on
// the median, if it has one (below it, or at most it for a ratio).
struct Figure {
    std::string key;
    Percentiles value;
    std::optional<double> target_p50;
    bool target_inclusive = false;
};

// ---- decide_4096_us ----

constexpr std::uint32_t kLedgerEntries = 4096;
constexpr std::uint32_t kOwners = 60;  // slots 1..60; the asker is slot 0 and holds nothing
constexpr Bytes kDeviceTotal = 80 * kGiB;
constexpr int kDecideWarmUp = 200;
constexpr int kDecideRuns = 2000;
constexpr int kEvict8Cycles = 50;  // each cycle: 8 holders load, the asker loads (timed) and drops
constexpr int kSpawnRounds = 3;    // each round: 32 workers, then 1,023

struct Prepared {
    Arbiter arbiter;
    Snapshot snapshot;
    event::Admission admission;
};

// The arbiter after 60 owners registered 4096 models (4-36 MiB each; half fully loaded,
// half partly offloaded; 1-3 references) and a 24 GiB load asked by slot 0 that does not
// fit in what is left free.
Prepared prepare() {
    Prepared p{Arbiter(ArbiterConfig{}, kLedgerEntries), Snapshot{}, event::Admission{}};
    std::mt19937_64 random(4096);
    const auto uniform = [&](std::uint64_t lo, std::uint64_t hi) {
        return std::uniform_int_distribution<std::uint64_t>(lo, hi)(random);
    };
    Snapshot setup{0, kDeviceTotal, kDeviceTotal, {}};
    for (std::uint32_t slot = 0; slot <= kOwners; ++slot) p.arbiter.handle(event::Joined{{slot, 1}}, setup);
    Bytes loaded_sum = 0;
    for (std::uint32_t i = 0; i < kLedgerEntries; ++i) {
        const std::uint32_t owner = 1 + i % kOwners;
        const std::uint64_t id = 1 + i / kOwners;
        const Bytes total = uniform(4 * kMiB, 36 * kMiB);
        const Bytes loaded = uniform(0, 1) == 0 ? total : uniform(0, total);
        loaded_sum += loaded;
        const auto kind = static_cast<std::uint16_t>(uniform(1, kModelKindCount - 1));
        p.arbiter.handle(event::Registered{{owner, 1}, ModelRegistered{id, id, total, loaded, 0, kind, 0, 0}}, setup);
        ResidencyReceipt residency{};
        residency.model_id = id;
        residency.sequence = 1;
        residency.loaded_bytes = loaded;
        residency.references = static_cast<std::uint32_t>(uniform(1, 3));
        p.arbiter.handle(event::Residency{{owner, 1}, residency}, setup);
    }
    p.arbiter.ledger().take_changed();  // as after a publish: the copies start with nothing pending
    p.snapshot = Snapshot{1, kDeviceTotal, kDeviceTotal - loaded_sum, {}};

    AdmissionRequest request{};
    request.device = 0;
    request.streams = 1;
    request.bytes = 24 * kGiB;
    request.largest_tensor = 256 * kMiB;
    p.admission = event::Admission{{0, 1}, 1, request};
    return p;
}

Percentiles measure_decide_4096() {
    const Prepared prepared = prepare();
    if (prepared.arbiter.ledger().size() != kLedgerEntries) {
        throw std::runtime_error("the prepared ledger holds " + std::to_string(prepared.arbiter.ledger().size()) +
                                 " entries, not " + std::to_string(kLedgerEntries));
    }
    std::vector<double> samples;
    samples.reserve(kDecideRuns);
    for (int run = 0; run < kDecideWarmUp + kDecideRuns; ++run) {
        Arbiter arbiter = prepared.arbiter;  // fresh state each run, copied outside the timing
        const auto start = Clock::now();
        const auto actions = arbiter.handle(prepared.admission, prepared.snapshot);
        const auto stop = Clock::now();
        // The decision must be the one meant: ask an owner to free memory.
        if (actions.empty() || !(std::holds_alternative<action::SendPartialUnload>(actions.front()) ||
                                 std::holds_alternative<action::SendDetach>(actions.front()))) {
            throw std::runtime_error("the admission did not start an eviction; the benchmark's setup is wrong");
        }
        if (run >= kDecideWarmUp) samples.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
    }
    return percentiles(std::move(samples));
}

}  // namespace

int main(int argc, char* argv[]) {
    bool json_output = false;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--json") == 0) {
            json_output = true;
        } else {
            std::fprintf(stderr, "bench-arbitration: unknown argument '%s'; usage: bench-arbitration [--json]\n", argv[i]);
            return 2;
        }
    }

    std::vector<Figure> figures;
    try {
        const auto worker = std::filesystem::canonical("/proc/self/exe").parent_path() / "comfy-worker";
        // First, while this process is small: each spawn round forks from it.
        std::vector<double> small, large, ratios;
        for (int round = 0; round < kSpawnRounds; ++round) {
            small.push_back(bench::supervisor_cpu_per_spawn_us(worker, 32));
            large.push_back(bench::supervisor_cpu_per_spawn_us(worker, 1023));
            ratios.push_back(large.back() / small.back());
        }
        figures.push_back({"spawn_cpu_ratio_1023_vs_32", percentiles(ratios), 1.3, true});
        figures.push_back({"spawn_cpu_per_worker_32_us", percentiles(small), std::nullopt});
        figures.push_back({"spawn_cpu_per_worker_1023_us", percentiles(large), std::nullopt});
        figures.push_back({"decide_4096_us", measure_decide_4096(), 50.0});
        figures.push_back({"admit_evict8_us", percentiles(bench::measure_admit_evict8(worker, kEvict8Cycles)), 200.0});
        figures.push_back({"decide_siblings_p1024_l65536_us", percentiles(bench::measure_decide_siblings()), 500.0});
        figures.push_back({"owner_death_m8192_us", percentiles(bench::measure_owner_death()), 1000.0});
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench-arbitration: %s\n", e.what());
        return 1;
    }

    if (json_output) {
        nlohmann::json out = nlohmann::json::object();
        for (const auto& f : figures) out[f.key] = {{"p50", f.value.p50}, {"p99", f.value.p99}};
        std::printf("%s\n", out.dump().c_str());
        return 0;
    }
    std::printf("arbitration (decide: %d runs after %d warm-up, ledger of %u entries over %u idle owners)\n",
                kDecideRuns, kDecideWarmUp, kLedgerEntries, kOwners);
    for (const auto& f : figures) {
        std::printf("  %-32s p50 %9.2f  p99 %9.2f", f.key.c_str(), f.value.p50, f.value.p99);
        if (f.target_p50) {
            const bool met = f.target_inclusive ? f.value.p50 <= *f.target_p50 : f.value.p50 < *f.target_p50;
            std::printf("   target p50 %s %g   %s", f.target_inclusive ? "<=" : "<", *f.target_p50, met ? "met" : "missed");
        }
        std::printf("\n");
    }
    return 0;
}
