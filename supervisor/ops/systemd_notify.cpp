#include "supervisor/ops/systemd_notify.hpp"

#include "supervisor/ops/log/log.hpp"

#include <systemd/sd-daemon.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace comfy::supervisor {

SystemdNotify::SystemdNotify(Supervised& supervisor) : watchdog_(supervisor.io()) {
    supervisor.on_all_started([this] { send("READY=1\nSTATUS=every worker is up"); });
    supervisor.on_shutdown([this] { send("STOPPING=1\nSTATUS=shutting down"); });
    std::uint64_t watchdog_us = 0;
    // Positive only when systemd set WATCHDOG_USEC for this very process.
    if (sd_watchdog_enabled(0, &watchdog_us) > 0) {
        interval_ = std::chrono::microseconds(watchdog_us / 2);
        schedule_ping();
    }
}

void SystemdNotify::schedule_ping() {
    watchdog_.expires_after(interval_);
    watchdog_.async_wait([this](const boost::system::error_code& error) {
        if (error) return;
        send("WATCHDOG=1");
        schedule_ping();
    });
}

void SystemdNotify::send(const char* state) {
    const int result = sd_notify(0, state);
    if (result >= 0 || failure_logged_) return;
    failure_logged_ = true;
    const std::string first_line(state, std::strcspn(state, "\n"));
    log_line("systemd: cannot send " + first_line + " to NOTIFY_SOCKET (" + std::strerror(-result) +
             "); systemd may stop or restart this service");
}

}  // namespace comfy::supervisor
