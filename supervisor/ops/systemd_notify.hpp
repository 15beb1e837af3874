#pragma once
// Tells systemd how the supervisor is doing, for a unit of Type=notify
// (deploy/systemd/comfy-supervisor@.service):
//   - while it starts, STATUS= with what it waits for (the GPU, then the participants not
//     up yet) and EXTEND_TIMEOUT_USEC= at every step, so that a ComfyUI that takes minutes
//     to start outlives the unit's TimeoutStartSec; but only as long as the config's own
//     limits let a start take (start_limit_of): past them systemd's time-out decides;
//   - READY=1 once every worker is up the first time (or has failed);
//   - WATCHDOG=1 at half the unit's WatchdogSec;
//   - STOPPING=1 when shutdown begins.
// The steps of the start and the pings come from timers on the supervisor's own loop, so
// a loop that is stuck stops them: systemd then fails the start, or restarts the running
// service. A step is half the watchdog's interval (the unit's statement of how soon a
// stuck supervisor must be seen), or kStartStep without a watchdog, and each extension
// lasts three steps. Started by anything else (no NOTIFY_SOCKET), it sends nothing.

#include "supervisor/config/config.hpp"
#include "supervisor/memory/supervised_device.hpp"
#include "supervisor/ops/supervised.hpp"

#include <boost/asio/steady_timer.hpp>

#include <chrono>

namespace comfy::supervisor {

// The longest the config lets the participants' first start take: the host's handshake,
// or a pack's handshake and then its start-up (ready_timeout), whichever is longer.
Milliseconds start_limit_of(const Config& config);

// Before the loop runs: the GPU is not usable yet (supervisor/memory/supervised_device.hpp);
// says so in STATUS and extends the start past the next try.
void tell_systemd_device_wait(const DeviceWaitStep& step);

class SystemdNotify {
public:
    static constexpr std::chrono::seconds kStartStep{10};

    SystemdNotify(Supervised& supervisor, Milliseconds start_limit);

private:
    void schedule_ping();
    void start_step();
    // Sends `state`; a failure is logged once, as systemd will act on what it missed.
    void send(const std::string& state);

    Supervised& supervisor_;
    boost::asio::steady_timer watchdog_;
    boost::asio::steady_timer start_;
    std::chrono::microseconds step_;
    Milliseconds start_limit_;
    std::chrono::steady_clock::time_point started_at_;
    bool started_ = false;
    bool failure_logged_ = false;
};

}  // namespace comfy::supervisor
