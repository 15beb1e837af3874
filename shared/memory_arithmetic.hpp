#pragma once
// ComfyUI's memory arithmetic (comfy/model_management.py), as pure functions, so the
// supervisor makes upstream's decisions for the whole machine and tests can check them
// against figures worked by hand.

#include <cstdint>

namespace comfy {

using Bytes = std::uint64_t;

inline constexpr Bytes kMiB = Bytes{1} << 20;
inline constexpr Bytes kGiB = Bytes{1} << 30;

// EXTRA_RESERVED_VRAM on Linux; `--reserve-vram` replaces it.
inline constexpr Bytes kDefaultReserve = 400 * kMiB;

// a + b, or UINT64_MAX where the sum would wrap: a wrapped sum of byte figures would lie.
constexpr Bytes saturating_add(Bytes a, Bytes b) noexcept { return a > ~Bytes{0} - b ? ~Bytes{0} : a + b; }

// Upstream computes its targets in Python floats and never rounds them: these do the same
// in double, operation for operation, so a decision at the boundary goes the same way.

// minimum_inference_memory(): 1024**3 * 0.8 + reserve, a float (1,278,423,859.2 bytes
// with the default reserve).
double minimum_inference_memory(Bytes reserve);

// The target load_models_gpu hands free_memory for a load of `weights`:
// weights * 1.1 + max(minimum_inference, forward + reserve), forward = streams x largest tensor.
double admission_target(Bytes weights, Bytes largest_tensor, std::uint32_t streams, Bytes reserve);

// free_memory's memory_to_free for one candidate: target - free, in double. Memory must be
// freed while it is above 0.
inline double memory_to_free(double target, Bytes free) { return target - static_cast<double>(free); }

// Whether a candidate with `loaded` bytes on the device is partially unloaded rather than
// detached: model_unload tries partially_unload only while memory_to_free < loaded_size().
inline bool unloads_partially(double to_free, Bytes loaded) { return to_free < static_cast<double>(loaded); }

// The whole bytes a partial unload asks for: a float shortfall rounded up, since
// partially_unload must free at least memory_to_free for the model to stay (freed >= it).
Bytes whole_bytes_up(double bytes);

// get_free_memory() for one asker: what the driver reports free on the device plus the
// allocator cache (reserved - active) that the asker itself could return. Another
// process's cache is never counted: the asker cannot free it.
Bytes free_for_asker(Bytes device_free, Bytes asker_reserved, Bytes asker_active);

// The reserve published to one participant: the base reserve plus what the others hold
// that its own driver reading does not show yet, capped at 0.75 of the device.
Bytes published_reserve(Bytes base_reserve, Bytes unseen_by_asker, Bytes device_total);

}  // namespace comfy
