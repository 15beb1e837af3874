#include "tests/soak/fault_plan.hpp"

#include <algorithm>

namespace comfy::soak {

namespace {

// One deck: every kind but the supervisor's kill, the hostile packs and the hostile calls
// twice (they are many).
constexpr FaultKind kDeck[] = {FaultKind::kill_worker,  FaultKind::kill_mid_eviction, FaultKind::kill_mid_admission,
                               FaultKind::stop_short,   FaultKind::stop_long,         FaultKind::hostile,
                               FaultKind::hostile,      FaultKind::hostile_call,      FaultKind::hostile_call};

// One supervisor kill per started five minutes, all in the first half, so that the last
// supervisor runs long enough for its memory and descriptors to tell.
constexpr std::chrono::seconds kSupervisorKillEvery{300};

}  // namespace

const char* fault_name(FaultKind kind) noexcept {
    switch (kind) {
        case FaultKind::kill_worker: return "kill-worker";
        case FaultKind::kill_mid_eviction: return "kill-mid-eviction";
        case FaultKind::kill_mid_admission: return "kill-mid-admission";
        case FaultKind::stop_short: return "stop-short";
        case FaultKind::stop_long: return "stop-long";
        case FaultKind::hostile: return "hostile";
        case FaultKind::hostile_call: return "hostile-call";
        case FaultKind::kill_supervisor: return "kill-supervisor";
    }
    return "?";
}

FaultPlan::FaultPlan(std::uint64_t seed, std::chrono::seconds length) : random_(seed) {
    const auto kills = 1 + length / kSupervisorKillEvery;
    const auto half = std::chrono::duration_cast<std::chrono::milliseconds>(length) / 2;
    std::uniform_int_distribution<std::int64_t> when(half.count() / 4, half.count());
    for (std::int64_t i = 0; i < kills; ++i) supervisor_kills_.push_back(std::chrono::milliseconds(when(random_)));
    std::sort(supervisor_kills_.rbegin(), supervisor_kills_.rend());
}

FaultKind FaultPlan::next(std::chrono::steady_clock::duration elapsed) {
    if (!supervisor_kills_.empty() && elapsed >= supervisor_kills_.back()) {
        supervisor_kills_.pop_back();
        return FaultKind::kill_supervisor;
    }
    if (deck_.empty()) {
        deck_.assign(std::begin(kDeck), std::end(kDeck));
        std::shuffle(deck_.begin(), deck_.end(), random_);
    }
    const FaultKind kind = deck_.back();
    deck_.pop_back();
    return kind;
}

std::chrono::milliseconds FaultPlan::pause() {
    return std::chrono::milliseconds(std::uniform_int_distribution<int>(200, 1500)(random_));
}

std::chrono::milliseconds FaultPlan::stop_length(FaultKind kind, std::chrono::milliseconds heartbeat_timeout) {
    // Short: well inside the time-out, whatever the last beat before the stop. Long: well
    // past it, so that a loaded machine's late heartbeat check still finds it.
    const auto t = heartbeat_timeout.count();
    const auto [low, high] = kind == FaultKind::stop_short ? std::pair{t / 20, t / 4} : std::pair{2 * t, 3 * t};
    return std::chrono::milliseconds(std::uniform_int_distribution<std::int64_t>(low, high)(random_));
}

std::size_t FaultPlan::pick(std::size_t count) { return std::uniform_int_distribution<std::size_t>(0, count - 1)(random_); }

}  // namespace comfy::soak
