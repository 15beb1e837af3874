#include "tests/soak/stall_watch.hpp"

namespace comfy::soak {

namespace {

constexpr std::chrono::milliseconds kTick{10};
// Late by this much, the machine did not run us: a loaded scheduler is late by tens of
// milliseconds, not hundreds.
constexpr std::chrono::milliseconds kStallAfter{250};

}  // namespace

StallWatch::StallWatch() : thread_([this] { watch(); }) {}

StallWatch::~StallWatch() {
    {
        const std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    thread_.join();
}

std::vector<StallWatch::Stall> StallWatch::stalls() const {
    const std::lock_guard lock(mutex_);
    return stalls_;
}

void StallWatch::watch() {
    for (;;) {
        const auto before = Clock::now();
        std::this_thread::sleep_for(kTick);
        const auto after = Clock::now();
        const std::lock_guard lock(mutex_);
        if (stopping_) return;
        if (after - before > kTick + kStallAfter) stalls_.push_back({before, after});
    }
}

}  // namespace comfy::soak
