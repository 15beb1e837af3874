#pragma once
// The device whose memory the supervisor arbitrates: the CUDA device the config names
// (the default), waited for at start while its driver may still be loading, or the
// simulated one when the config asks for it.

#include "supervisor/config/config.hpp"
#include "worker/device.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

namespace comfy::supervisor {

// The configured device can never be used as configured (this build has no CUDA
// support) and the config says stop: exit status 2, as for a bad config.
class DeviceUnavailable : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The configured CUDA device is still not usable after the config's device.wait_ms and
// the config says stop: an exit status that systemd restarts (kDeviceNotReadyStatus).
class DeviceNotReady : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};
inline constexpr int kDeviceNotReadyStatus = 75;  // EX_TEMPFAIL: try again later

// Why the device cannot be used now; nothing when it can.
using DeviceProbe = std::function<std::optional<std::string>()>;

// One failed try of the wait: why, how long the wait has lasted, and how long until the
// next try (for systemd's start time-out, which must outlast it).
struct DeviceWaitStep {
    std::string reason;
    Milliseconds waited;
    Milliseconds next_try;
};
using DeviceWaitProgress = std::function<void(const DeviceWaitStep&)>;

// The pauses between tries: doubling from `first` up to `longest`.
struct DeviceWaitBackoff {
    Milliseconds first{250};
    Milliseconds longest{5'000};
};

// Tries `probe` until the device is usable or `wait` has passed (the last try falls at
// its end), pausing between tries; `progress` hears of each failed try but the last.
// Nothing once usable; otherwise the last try's reason. Blocks: it runs before the loop.
std::optional<std::string> wait_for_device(Milliseconds wait, const DeviceProbe& probe,
                                           const DeviceWaitProgress& progress, DeviceWaitBackoff backoff = {});

// A driver that takes longer than this to say whether its device is usable is hung.
inline constexpr std::chrono::seconds kDeviceProbeTimeout{30};

// Whether CUDA device `index` is usable (worker::cuda_unavailable_reason), asked in a
// child process of its own: the CUDA runtime remembers a failed initialisation for the
// life of the process, so a process that asked before the driver was up would never see
// it come. The supervisor itself touches CUDA only once a child found the device usable;
// a child forked after its parent started CUDA could not use it, so ask before that.
std::optional<std::string> probe_cuda_in_child(int index);

// Waits up to device.wait for the configured CUDA device (nothing to wait for with the
// simulated device, or in a build without CUDA support), saying so in the log at the
// first failed try and when the device comes.
void await_configured_device(const DeviceConfig& device, const DeviceWaitProgress& progress);

// Opens the configured CUDA device, null for the simulated one. When the CUDA device
// cannot be used, says in one line why and what to do (`config_file` names the config),
// and either falls back to the simulated device (the config's device.fallback allows it;
// `device` then says simulated) or throws DeviceUnavailable (never usable by this build)
// or DeviceNotReady.
std::unique_ptr<worker::Device> open_configured_device(DeviceConfig& device, const std::string& config_file);

// Which device is supervised and how big it is, for the log at start: "supervising CUDA
// device 0: 80.0 GiB". `cuda`: what open_configured_device opened.
std::string supervised_device_text(const DeviceConfig& device, const worker::Device* cuda);

}  // namespace comfy::supervisor
