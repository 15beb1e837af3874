#pragma once
// Notices when the machine stops running us: a thread of its own sleeps a few milliseconds
// at a time and records every wake-up that came far too late. A participant whose
// heartbeat thread was not run for the heartbeat time-out is rightly found hung by the
// supervisor; when the soak's own thread was held up in the same seconds, the machine
// (a loaded or paused virtual machine) stalled, and such a verdict is no fault of the
// supervisor's.

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace comfy::soak {

class StallWatch {
public:
    using Clock = std::chrono::steady_clock;
    struct Stall {
        Clock::time_point from, to;
    };

    StallWatch();
    ~StallWatch();
    StallWatch(const StallWatch&) = delete;
    StallWatch& operator=(const StallWatch&) = delete;

    // The stalls so far, oldest first.
    std::vector<Stall> stalls() const;

private:
    void watch();

    mutable std::mutex mutex_;  // process-local: stalls_ and stopping_, between the threads
    std::vector<Stall> stalls_;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace comfy::soak
