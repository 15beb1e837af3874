#include "supervisor/memory/supervised_device.hpp"

#include "ipc/unique_fd.hpp"
#include "shared/byte_size.hpp"
#include "supervisor/ops/log/log.hpp"
#include "worker/device_factory.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace comfy::supervisor {

namespace {

using Clock = std::chrono::steady_clock;

// "60 s", or "300 ms" where seconds would round.
std::string duration_text(Milliseconds time) {
    if (time.count() % 1000 == 0) return std::to_string(time.count() / 1000) + " s";
    return std::to_string(time.count()) + " ms";
}

std::string device_name(int index) { return "CUDA device " + std::to_string(index); }

// What to do about a CUDA device that is not there, whoever wrote the config.
std::string advice(const std::string& config_file) {
    return "install or start the NVIDIA driver (nvidia-smi must list the GPU), or, to run without a GPU, set "
           "\"device\": {\"kind\": \"simulated\", \"total_bytes\": \"24GiB\"} in " + config_file;
}

// The child's side of probe_cuda_in_child: the reason written to `report`, exit 1; or
// nothing written, exit 0, for a usable device.
[[noreturn]] void probe_and_exit(int index, int report) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a supervisor that dies mid-wait leaves no probe behind
    const auto reason = worker::cuda_unavailable_reason(index);
    for (std::size_t done = 0; reason && done < reason->size();) {
        const ssize_t wrote = ::write(report, reason->data() + done, reason->size() - done);
        if (wrote < 0 && errno == EINTR) continue;
        if (wrote <= 0) break;
        done += static_cast<std::size_t>(wrote);
    }
    // _exit: the parent's stdio buffers and exit handlers are the parent's to run.
    ::_exit(reason ? 1 : 0);
}

// Everything the child writes, until it closes its end or `timeout` passes; false on time-out.
bool read_report(int report, std::string& text, Clock::time_point deadline) {
    char buffer[512];
    for (;;) {
        const auto left = std::chrono::ceil<Milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) return false;
        pollfd ready{report, POLLIN, 0};
        const int polled = ::poll(&ready, 1, static_cast<int>(left.count()));
        if (polled < 0 && errno == EINTR) continue;
        if (polled == 0) return false;
        if (polled < 0) return true;  // a poll error ends the report as its close would
        const ssize_t got = ::read(report, buffer, sizeof buffer);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return true;
        text.append(buffer, static_cast<std::size_t>(got));
    }
}

}  // namespace

std::optional<std::string> wait_for_device(Milliseconds wait, const DeviceProbe& probe,
                                           const DeviceWaitProgress& progress, DeviceWaitBackoff backoff) {
    const auto started = Clock::now();
    const auto deadline = started + wait;
    auto pause = backoff.first;
    for (;;) {
        auto reason = probe();
        if (!reason) return std::nullopt;
        const auto now = Clock::now();
        if (now >= deadline) return reason;
        const auto next = std::min(pause, std::chrono::ceil<Milliseconds>(deadline - now));
        progress({std::move(*reason), std::chrono::floor<Milliseconds>(now - started), next});
        std::this_thread::sleep_for(next);
        pause = std::min(pause * 2, backoff.longest);
    }
}

std::optional<std::string> probe_cuda_in_child(int index) {
    const std::string cannot = "cannot probe " + device_name(index) + ": ";
    int ends[2];
    if (::pipe2(ends, O_CLOEXEC) != 0) return cannot + "pipe2: " + std::strerror(errno);
    ipc::UniqueFd report(ends[0]);
    ipc::UniqueFd child_end(ends[1]);
    const pid_t pid = ::fork();
    if (pid < 0) return cannot + "fork: " + std::strerror(errno);
    if (pid == 0) probe_and_exit(index, child_end.get());
    child_end.reset();  // the report ends when the child's copy closes
    std::string text;
    const bool answered = read_report(report.get(), text, Clock::now() + kDeviceProbeTimeout);
    if (!answered) ::kill(pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!answered) {
        return device_name(index) + " did not answer within " + std::to_string(kDeviceProbeTimeout.count()) +
               " s whether it is usable (check nvidia-smi and dmesg for a hung driver)";
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && text.empty()) return std::nullopt;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 1 && !text.empty()) return text;
    if (WIFSIGNALED(status)) {
        const char* signal = sigabbrev_np(WTERMSIG(status));
        return cannot + "its probe died of " +
               (signal ? "SIG" + std::string(signal) : "signal " + std::to_string(WTERMSIG(status)));
    }
    return cannot + "its probe exited with status " + std::to_string(WEXITSTATUS(status));
}

void await_configured_device(const DeviceConfig& device, const DeviceWaitProgress& progress) {
    if (device.kind != DeviceKind::cuda || !worker::built_with_cuda() || device.wait.count() == 0) return;
    const auto name = device_name(device.cuda_index);
    bool told = false;
    const auto started = Clock::now();
    const auto missing = wait_for_device(
        device.wait, [&] { return probe_cuda_in_child(device.cuda_index); },
        [&](const DeviceWaitStep& step) {
            if (!told) {
                log_warning(step.reason + "; waiting up to " + duration_text(device.wait) + " (device.wait_ms) for " +
                            name + ", trying again with backoff");
                told = true;
            }
            progress(step);
        });
    if (!missing && told) {
        log_line(name + " is usable after " +
                 duration_text(std::chrono::floor<Milliseconds>(Clock::now() - started)) + " of waiting");
    }
}

std::unique_ptr<worker::Device> open_configured_device(DeviceConfig& device, const std::string& config_file) {
    if (device.kind == DeviceKind::cuda) {
        const auto reason = worker::cuda_unavailable_reason(device.cuda_index);
        if (!reason) return worker::open_cuda_device(device.cuda_index);
        if (device.cuda_fallback == CudaFallback::stop) {
            if (!worker::built_with_cuda()) {
                throw DeviceUnavailable(*reason + "; rebuild with the CUDA toolkit, or, to run without a GPU, set "
                                                  "\"device\": {\"kind\": \"simulated\"} in " + config_file);
            }
            const std::string waited =
                device.wait.count() == 0 ? "" : " after waiting " + duration_text(device.wait) + " (device.wait_ms)";
            throw DeviceNotReady(*reason + waited + "; " + advice(config_file));
        }
        log_warning(*reason + "; using the simulated device instead (the config's device.fallback)");
        device.kind = DeviceKind::simulated;
    }
    return nullptr;
}

std::string supervised_device_text(const DeviceConfig& device, const worker::Device* cuda) {
    if (cuda) return "supervising " + device_name(device.cuda_index) + ": " + format_byte_size(cuda->total_bytes());
    return "supervising a simulated device: " + format_byte_size(device.total_bytes) +
           " (no GPU: the supervisor keeps its account)";
}

}  // namespace comfy::supervisor
