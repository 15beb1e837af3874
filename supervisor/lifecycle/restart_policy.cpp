#include "supervisor/lifecycle/restart_policy.hpp"

#include <algorithm>

namespace comfy::supervisor {

bool RestartTracker::gives_up_at(Clock::time_point now) const {
    const auto within =
        std::count_if(deaths_.begin(), deaths_.end(), [&](auto death) { return now - death <= policy_.window; });
    return static_cast<std::size_t>(within) + 1 > policy_.max_restarts;
}

RestartTracker::Decision RestartTracker::on_death(Clock::time_point now) {
    const bool give_up = gives_up_at(now);
    while (!deaths_.empty() && now - deaths_.front() > policy_.window) deaths_.pop_front();
    deaths_.push_back(now);
    if (give_up) return {true, Milliseconds{0}};
    ++restarts_;
    // The n-th death inside the window waits initial * 2^(n-1), capped.
    Milliseconds delay = policy_.initial_backoff;
    for (std::size_t i = 1; i < deaths_.size() && delay < policy_.max_backoff; ++i) delay *= 2;
    return {false, std::min(delay, policy_.max_backoff)};
}

}  // namespace comfy::supervisor
