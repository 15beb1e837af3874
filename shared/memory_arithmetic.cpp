#include "shared/memory_arithmetic.hpp"

#include <algorithm>
#include <cmath>

namespace comfy {

double minimum_inference_memory(Bytes reserve) {
    return static_cast<double>(kGiB) * 0.8 + static_cast<double>(reserve);
}

double admission_target(Bytes weights, Bytes largest_tensor, std::uint32_t streams, Bytes reserve) {
    const Bytes forward = largest_tensor > ~Bytes{0} / std::max<Bytes>(streams, 1) ? ~Bytes{0} : largest_tensor * streams;
    // Python's max() of a float and an int, then need * 1.1 + extra_mem: all in double.
    const double extra = std::max(minimum_inference_memory(reserve), static_cast<double>(saturating_add(forward, reserve)));
    return static_cast<double>(weights) * 1.1 + extra;
}

Bytes whole_bytes_up(double bytes) {
    if (!(bytes > 0)) return 0;
    const double up = std::ceil(bytes);
    return up >= std::ldexp(1.0, 64) ? ~Bytes{0} : static_cast<Bytes>(up);  // saturates, as saturating_add
}

Bytes free_for_asker(Bytes device_free, Bytes asker_reserved, Bytes asker_active) {
    return saturating_add(device_free, asker_reserved > asker_active ? asker_reserved - asker_active : 0);
}

Bytes published_reserve(Bytes base_reserve, Bytes unseen_by_asker, Bytes device_total) {
    const auto cap = static_cast<Bytes>(static_cast<double>(device_total) * 0.75);
    return std::min(saturating_add(base_reserve, unseen_by_asker), std::max(cap, base_reserve));
}

}  // namespace comfy
