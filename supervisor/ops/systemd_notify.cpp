#include "supervisor/ops/systemd_notify.hpp"

#include "supervisor/ops/log/log.hpp"

#include <systemd/sd-daemon.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

namespace comfy::supervisor {

namespace {

using std::chrono::microseconds;

// An extension lasts this many steps: one late step does not end the start.
constexpr int kStepsPerExtension = 3;

// Half the watchdog's interval when systemd set one for this very process, else kStartStep.
microseconds step_of_start() {
    std::uint64_t watchdog_us = 0;
    if (sd_watchdog_enabled(0, &watchdog_us) > 0 && watchdog_us >= 2) return microseconds(watchdog_us / 2);
    return SystemdNotify::kStartStep;
}

std::string extend_by(microseconds time) { return "EXTEND_TIMEOUT_USEC=" + std::to_string(time.count()); }

std::string seconds_text(std::chrono::nanoseconds time) {
    return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(time).count()) + " s";
}

// Sends `state`; false (with the reason in `error`) when NOTIFY_SOCKET is set but cannot take it.
bool sent(const std::string& state, std::string& error) {
    const int result = sd_notify(0, state.c_str());
    if (result >= 0) return true;
    error = "systemd: cannot send " + state.substr(0, state.find('\n')) + " to NOTIFY_SOCKET (" +
            std::strerror(-result) + "); systemd may stop or restart this service";
    return false;
}

}  // namespace

Milliseconds start_limit_of(const Config& config) {
    Milliseconds limit{0};
    if (config.comfyui) limit = config.limits.host_handshake_timeout;
    if (!config.packs.empty()) limit = std::max(limit, config.limits.handshake_timeout + config.limits.ready_timeout);
    return limit;
}

void tell_systemd_device_wait(const DeviceWaitStep& step) {
    // Before the loop, once per try: only a broken NOTIFY_SOCKET fails, and then every try
    // would, so its line is said once for the process.
    static bool failure_logged = false;
    const microseconds extension = step.next_try + kDeviceProbeTimeout + kStepsPerExtension * step_of_start();
    std::string error;
    if (!sent(extend_by(extension) + "\nSTATUS=waiting for the GPU (" + seconds_text(step.waited) + " so far, " +
                  "device.wait_ms): " + step.reason,
              error) &&
        !std::exchange(failure_logged, true)) {
        log_warning(error);
    }
}

SystemdNotify::SystemdNotify(Supervised& supervisor, Milliseconds start_limit)
    : supervisor_(supervisor),
      watchdog_(supervisor.io()),
      start_(supervisor.io()),
      step_(step_of_start()),
      start_limit_(start_limit),
      started_at_(std::chrono::steady_clock::now()) {
    supervisor.on_all_started([this] {
        started_ = true;
        start_.cancel();
        send("READY=1\nSTATUS=" + readiness_text(supervisor_.readiness()));
    });
    supervisor.on_shutdown([this] {
        start_.cancel();  // an extension now would lengthen systemd's stop time-out instead
        send("STOPPING=1\nSTATUS=shutting down");
    });
    // Now, before the loop runs: the time until its first step is covered too.
    send(extend_by(kStepsPerExtension * step_) + "\nSTATUS=starting");
    // The first step once the loop runs, when the participants have been spawned.
    start_.expires_after(microseconds(0));
    start_.async_wait([this](const boost::system::error_code& error) {
        if (!error) start_step();
    });
    // Positive only when systemd set WATCHDOG_USEC for this very process.
    if (sd_watchdog_enabled(0, nullptr) > 0) schedule_ping();
}

void SystemdNotify::start_step() {
    if (started_ || supervisor_.shutting_down()) return;
    const auto taken = std::chrono::steady_clock::now() - started_at_;
    const std::string status = readiness_text(supervisor_.readiness());
    if (taken > start_limit_) {
        // No more extensions: what is left of the last one ends the start.
        send("STATUS=the start has outlasted the config's limits (" + seconds_text(start_limit_) +
             "); systemd's start time-out decides: " + status);
        return;
    }
    send(extend_by(kStepsPerExtension * step_) + "\nSTATUS=starting: " + status);
    start_.expires_after(step_);
    start_.async_wait([this](const boost::system::error_code& error) {
        if (!error) start_step();
    });
}

void SystemdNotify::schedule_ping() {
    watchdog_.expires_after(step_);
    watchdog_.async_wait([this](const boost::system::error_code& error) {
        if (error) return;
        send("WATCHDOG=1");
        schedule_ping();
    });
}

void SystemdNotify::send(const std::string& state) {
    std::string error;
    if (sent(state, error) || failure_logged_) return;
    failure_logged_ = true;
    log_warning(error);
}

}  // namespace comfy::supervisor
