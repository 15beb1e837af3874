#include "supervisor/memory/supervised_device.hpp"

#include "supervisor/ops/log/log.hpp"
#include "worker/device_factory.hpp"

namespace comfy::supervisor {

std::unique_ptr<worker::Device> open_configured_device(DeviceConfig& device) {
    if (device.kind != DeviceKind::cuda) return nullptr;
    if (const auto reason = worker::cuda_unavailable_reason(device.cuda_index)) {
        if (device.cuda_fallback == CudaFallback::stop) {
            throw DeviceUnavailable(*reason + "; fix the driver or set \"fallback\": \"simulated\" in the config's device");
        }
        log_line(*reason + "; using the simulated device instead (the config's device.fallback)");
        device.kind = DeviceKind::simulated;
        return nullptr;
    }
    return worker::open_cuda_device(device.cuda_index);
}

}  // namespace comfy::supervisor
