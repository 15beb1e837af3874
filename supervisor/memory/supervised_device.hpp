#pragma once
// The device whose memory the supervisor arbitrates: the CUDA device the config names,
// when it can be used, or the simulated one.

#include "supervisor/config/config.hpp"
#include "worker/device.hpp"

#include <memory>
#include <stdexcept>

namespace comfy::supervisor {

// The configured device cannot be used and the config says to stop (exit status 2).
class DeviceUnavailable : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Opens the configured CUDA device; null for the simulated one. When the CUDA device
// cannot be used, says in one line why and either falls back to the simulated device
// (the config's device.fallback allows it; `device` then says simulated) or throws
// DeviceUnavailable.
std::unique_ptr<worker::Device> open_configured_device(DeviceConfig& device);

}  // namespace comfy::supervisor
