#include "supervisor/lifecycle/restart_policy.hpp"

#include <algorithm>

namespace comfy::supervisor {

RestartTracker::Decision RestartTracker::on_death(Clock::time_point now) {
    while (!deaths_.empty() && now - deaths_.front() > policy_.window) deaths_.pop_front();
    deaths_.push_back(now);
    if (deaths_.size() > policy_.max_restarts) return {true, Milliseconds{0}};
    ++restarts_;
    // The n-th death inside the window waits initial * 2^(n-1), capped.
    Milliseconds delay = policy_.initial_backoff;
    for (std::size_t i = 1; i < deaths_.size() && delay < policy_.max_backoff; ++i) delay *= 2;
    return {false, std::min(delay, policy_.max_backoff)};
}

}  // namespace comfy::supervisor
