#pragma once
// Tells systemd how the supervisor is doing, for a unit of Type=notify
// (deploy/systemd/comfy-supervisor@.service): READY=1 once every worker is up the first
// time (or has failed), STOPPING=1 when shutdown begins, and WATCHDOG=1 at half the unit's
// WatchdogSec. The pings come from a timer on the supervisor's own event loop, so a loop
// that is stuck stops them and systemd restarts the service. Started by anything else
// (no NOTIFY_SOCKET), it sends nothing.

#include "supervisor/ops/supervised.hpp"

#include <boost/asio/steady_timer.hpp>

#include <chrono>

namespace comfy::supervisor {

class SystemdNotify {
public:
    explicit SystemdNotify(Supervised& supervisor);

private:
    void schedule_ping();
    // Sends `state`; a failure is logged once, as systemd will act on what it missed.
    void send(const char* state);

    boost::asio::steady_timer watchdog_;
    std::chrono::microseconds interval_{0};
    bool failure_logged_ = false;
};

}  // namespace comfy::supervisor
