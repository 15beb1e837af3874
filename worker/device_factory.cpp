#include "worker/device_factory.hpp"

#if COMFY_HAVE_CUDA
#include "worker/cuda_device.hpp"
#endif

#include <stdexcept>

namespace comfy::worker {

bool built_with_cuda() noexcept {
#if COMFY_HAVE_CUDA
    return true;
#else
    return false;
#endif
}

std::optional<std::string> cuda_unavailable_reason([[maybe_unused]] int index) {
#if COMFY_HAVE_CUDA
    return CudaDevice::probe(index);
#else
    return std::string("this build has no CUDA support (the CUDA toolkit was not found at build time)");
#endif
}

std::unique_ptr<Device> open_cuda_device(int index) {
#if COMFY_HAVE_CUDA
    // CudaDevice's constructor probes the device and throws the reason with what to do.
    return std::make_unique<CudaDevice>(index);
#else
    throw std::runtime_error("cannot open CUDA device " + std::to_string(index) + ": " + *cuda_unavailable_reason(index) +
                             "; rebuild with the CUDA toolkit installed, or use the simulated device");
#endif
}

DeviceResolution resolve_device_choice(const DeviceChoice& choice) {
    DeviceResolution resolution;
    if (choice.kind == DeviceChoice::Kind::simulated) return resolution;
    if (choice.fall_back_to_simulated) {
        if (auto reason = cuda_unavailable_reason(choice.cuda_index)) {
            resolution.fallback_reason = std::move(*reason);
            return resolution;
        }
    }
    // Without a fallback, opening throws the one-line reason itself.
    resolution.cuda = open_cuda_device(choice.cuda_index);
    return resolution;
}

}  // namespace comfy::worker
