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

// minimum_inference_memory(): 0.8 GiB plus the reserve, truncated to whole bytes as
// Python's int() would (0.8 GiB is 858993459.2 bytes).
Bytes minimum_inference_memory(Bytes reserve);

// The bytes a load of `weights` needs free before it starts:
// int(weights * 1.1) + max(minimum_inference, forward + reserve), forward = streams x largest tensor.
Bytes admission_target(Bytes weights, Bytes largest_tensor, std::uint32_t streams, Bytes reserve);

// load_models_gpu's low-VRAM weight budget for a model with `loaded` bytes already on
// the device: max(0, cur - minimum, min(cur * ratio, cur - inference)) - loaded, with
// cur = free + loaded. Negative means "unload this much"; upstream turns 0 into 0.1,
// which here is 1 byte (a budget that loads nothing new).
std::int64_t weight_budget(Bytes free, Bytes loaded, Bytes minimum, Bytes inference, double min_weight_ratio);

// get_free_memory() for one asker: what the driver reports free on the device plus the
// allocator cache (reserved - active) that the asker itself could return. Another
// process's cache is never counted: the asker cannot free it.
Bytes free_for_asker(Bytes device_free, Bytes asker_reserved, Bytes asker_active);

// The reserve published to one participant: the base reserve plus what the others hold
// that its own driver reading does not show yet, capped at 0.75 of the device.
Bytes published_reserve(Bytes base_reserve, Bytes unseen_by_asker, Bytes device_total);

}  // namespace comfy
