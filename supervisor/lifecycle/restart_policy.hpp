#pragma once
// When to restart a dead worker: exponential backoff, and an intensity limit past which
// the pack is marked failed until an operator asks again (Erlang/OTP's rule, with
// systemd's doubling delay).

#include "supervisor/config/config.hpp"

#include <chrono>
#include <deque>

namespace comfy::supervisor {

// A participant that exits with this status (sysexits.h's EX_CONFIG) cannot run as it is
// configured (a pack that fails to import): restarting it would only fail again, so the
// pack is marked failed at once, until an operator retries it.
inline constexpr int kExitCannotRun = 78;

class RestartTracker {
public:
    using Clock = std::chrono::steady_clock;

    struct Decision {
        bool give_up;        // past the intensity limit: mark the pack failed
        Milliseconds delay;  // otherwise: restart after this long
    };

    explicit RestartTracker(RestartPolicy policy) : policy_(policy) {}

    // Records a death at `now` and decides what follows.
    Decision on_death(Clock::time_point now);
    // Whether a death at `now` would be past the limit, recording nothing: what on_death(now)
    // will decide, known before (the host hears of an exit with whether a restart follows).
    bool gives_up_at(Clock::time_point now) const;
    // An operator asked for the pack again: forget the deaths.
    void reset() { deaths_.clear(); }
    std::uint32_t restarts() const noexcept { return restarts_; }

private:
    RestartPolicy policy_;
    std::deque<Clock::time_point> deaths_;  // within the window
    std::uint32_t restarts_ = 0;
};

}  // namespace comfy::supervisor
