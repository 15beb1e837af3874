#pragma once
// Choosing a worker's device: use CUDA or not, and why not. Built with or without the CUDA
// toolkit (COMFY_HAVE_CUDA is defined only in builds that have it).
//
// The factory never constructs the simulated device: that needs the segment view and the
// census writer the caller owns. It only answers whether CUDA is chosen and usable, opens
// the CUDA device when it is, and otherwise tells the caller why, so that the caller
// decides: build its simulated device (fallback allowed) or stop with the reason.
//
// DeviceChoice mirrors the supervisor's device config without depending on it (the worker
// must not depend on the supervisor).

#include "worker/device.hpp"

#include <memory>
#include <optional>
#include <string>

namespace comfy::worker {

struct DeviceChoice {
    enum class Kind { simulated, cuda };
    Kind kind = Kind::simulated;
    int cuda_index = 0;
    bool fall_back_to_simulated = false;  // when CUDA is chosen but unusable; else stop
};

// Whether this build has the CUDA backend.
bool built_with_cuda() noexcept;

// nullopt when CUDA device `index` exists and can be used by this process; otherwise one
// line saying why not, e.g. "CUDA device 0 is not usable: no CUDA-capable device is
// detected (cudaGetDeviceCount: cudaErrorNoDevice)", or, in a build without the toolkit,
// "this build has no CUDA support (the CUDA toolkit was not found at build time)".
// When usable, device `index` is left current on the calling thread with its context made.
std::optional<std::string> cuda_unavailable_reason(int index);

// Opens CUDA device `index` (a CudaDevice). Throws std::runtime_error, one line containing
// cuda_unavailable_reason(index) and what to do, when it is unusable or the build has no
// CUDA support.
std::unique_ptr<Device> open_cuda_device(int index);

// What a DeviceChoice comes to. At most one of the two is set:
//   kind simulated                          -> neither: build the simulated device
//   kind cuda, usable                       -> cuda: the opened device
//   kind cuda, unusable, fall back allowed  -> fallback_reason: build the simulated device
//                                              and say why (one line)
// kind cuda, unusable, no fallback: resolve_device_choice throws std::runtime_error (one line).
struct DeviceResolution {
    std::unique_ptr<Device> cuda;
    std::optional<std::string> fallback_reason;
};
DeviceResolution resolve_device_choice(const DeviceChoice& choice);

}  // namespace comfy::worker
