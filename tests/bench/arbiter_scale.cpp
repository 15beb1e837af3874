#include "tests/bench/arbiter_scale.hpp"

#include "supervisor/arbiter/arbiter.hpp"

#include <chrono>
#include <random>
#include <stdexcept>
#include <string>

namespace comfy::bench {

namespace {

using Clock = std::chrono::steady_clock;
using namespace comfy::arbiter;

constexpr std::uint32_t kParticipants = 1024;  // slot 0 the host, 1..1023 the packs
constexpr std::uint32_t kLedgerEntries = 65536;
constexpr Bytes kDeviceTotal = 80 * kGiB;
// Each run handles one event on a fresh copy of the prepared arbiter; a copy of 65,536
// entries takes milliseconds, so fewer runs than decide_4096_us.
constexpr int kWarmUp = 10;
constexpr int kRuns = 200;

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// Times `event` on a fresh copy of `prepared` per run; `check` says whether the actions
// are the decision meant (a wrong setup fails the benchmark rather than timing nothing).
template <class Check>
std::vector<double> time_event(const Arbiter& prepared, const Event& event, const Snapshot& snapshot, Check check) {
    std::vector<double> samples;
    samples.reserve(kRuns);
    for (int run = 0; run < kWarmUp + kRuns; ++run) {
        Arbiter arbiter = prepared;  // outside the timing
        const auto start = Clock::now();
        const auto actions = arbiter.handle(event, snapshot);
        const auto stop = Clock::now();
        check(arbiter, actions);
        if (run >= kWarmUp) samples.push_back(micros(stop - start));
    }
    return samples;
}

ModelRegistered model(std::uint64_t id, Bytes total, std::uint32_t device) {
    return ModelRegistered{id, id, total, total, device, 1, 0, 0};
}

}  // namespace

// All 1,024 participants idle; 65,536 models spread round-robin over the 1,023 packs, all
// on device 1, so the host's load on device 0 finds no candidate: the ledger is exhausted
// at once and every idle sibling not holding a kept model is asked for a partial release.
// The host keeps eight models (slots 1-8 each hold one), so eight siblings are skipped.
std::vector<double> measure_decide_siblings() {
    ArbiterConfig config;
    config.no_fit = NoFitPolicy::refuse;
    Arbiter prepared(config, kLedgerEntries);
    const Snapshot setup{0, kDeviceTotal, kDeviceTotal, {}};
    for (std::uint32_t slot = 0; slot < kParticipants; ++slot) prepared.handle(event::Joined{{slot, 1}}, setup);
    for (std::uint32_t i = 0; i < kLedgerEntries; ++i) {
        const std::uint32_t owner = 1 + i % (kParticipants - 1);
        prepared.handle(event::Registered{{owner, 1}, model(1 + i / (kParticipants - 1), 4 * kMiB, 1)}, setup);
    }
    prepared.ledger().take_changed();
    if (prepared.ledger().size() != kLedgerEntries) throw std::runtime_error("decide_siblings: the ledger is not full");

    AdmissionRequest request{};
    request.streams = 1;
    request.bytes = 24 * kGiB;
    constexpr std::uint32_t kKept = 8;
    std::vector<std::uint64_t> keep;
    for (std::uint32_t i = 0; i < kKept; ++i) keep.push_back(machine_model_key(1 + i, 1));
    request.keep_loaded_count = kKept;
    const Snapshot snapshot{1, kDeviceTotal, 8 * kGiB, {}};
    const std::size_t expected = kParticipants - 1 - kKept;
    return time_event(prepared, event::Admission{{0, 1}, 1, request, keep}, snapshot, [&](const Arbiter&, const auto& actions) {
        std::size_t asked = 0;
        for (const auto& a : actions) asked += std::holds_alternative<action::SendPartialRelease>(a) ? 1 : 0;
        if (asked != expected) {
            throw std::runtime_error("decide_siblings: " + std::to_string(asked) + " siblings asked, not " +
                                     std::to_string(expected) + "; the benchmark's setup is wrong");
        }
    });
}

// A full ledger of 65,536 entries: slot 1 holds 8,192 models, registered interleaved with
// the other 56 owners' so that its rows are spread over the whole table; then slot 1 dies.
std::vector<double> measure_owner_death() {
    constexpr std::uint32_t kDeadOwnerModels = 8192;
    constexpr std::uint32_t kOthers = 56;
    Arbiter prepared(ArbiterConfig{}, kLedgerEntries);
    const Snapshot setup{0, kDeviceTotal, kDeviceTotal, {}};
    for (std::uint32_t slot = 1; slot <= 1 + kOthers; ++slot) prepared.handle(event::Joined{{slot, 1}}, setup);
    std::mt19937_64 random(8192);
    std::uint64_t next_id = 1;
    for (std::uint32_t i = 0; i < kLedgerEntries; ++i) {
        // One in eight rows is the dying owner's, the rest round-robin over the others.
        const std::uint32_t owner = i % 8 == 0 ? 1 : 2 + static_cast<std::uint32_t>(random() % kOthers);
        prepared.handle(event::Registered{{owner, 1}, model(next_id++, 1 + random() % (64 * kMiB), 0)}, setup);
    }
    prepared.ledger().take_changed();
    if (prepared.ledger().size() != kLedgerEntries) throw std::runtime_error("owner_death: the ledger is not full");
    return time_event(prepared, event::Left{{1, 1}}, setup, [&](const Arbiter& arbiter, const auto&) {
        if (arbiter.ledger().size() != kLedgerEntries - kDeadOwnerModels) {
            throw std::runtime_error("owner_death: the ledger holds " + std::to_string(arbiter.ledger().size()) +
                                     " entries after the death; the benchmark's setup is wrong");
        }
    });
}

}  // namespace comfy::bench
