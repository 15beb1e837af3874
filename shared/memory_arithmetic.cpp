#include "shared/memory_arithmetic.hpp"

#include <algorithm>

namespace comfy {

Bytes minimum_inference_memory(Bytes reserve) {
    // 0.8 * 2^30 exactly as a double, then truncated: 858993459.
    return static_cast<Bytes>(0.8 * static_cast<double>(kGiB)) + reserve;
}

Bytes admission_target(Bytes weights, Bytes largest_tensor, std::uint32_t streams, Bytes reserve) {
    const auto headroom = static_cast<Bytes>(static_cast<double>(weights) * 1.1);
    const Bytes forward = largest_tensor > ~Bytes{0} / std::max<Bytes>(streams, 1) ? ~Bytes{0} : largest_tensor * streams;
    return saturating_add(headroom, std::max(minimum_inference_memory(reserve), saturating_add(forward, reserve)));
}

std::int64_t weight_budget(Bytes free, Bytes loaded, Bytes minimum, Bytes inference, double min_weight_ratio) {
    const double current = static_cast<double>(free) + static_cast<double>(loaded);
    const double by_minimum = current - static_cast<double>(minimum);
    const double by_ratio = std::min(current * min_weight_ratio, current - static_cast<double>(inference));
    const double budget = std::max({0.0, by_minimum, by_ratio}) - static_cast<double>(loaded);
    const auto whole = static_cast<std::int64_t>(budget);
    return whole == 0 ? 1 : whole;
}

Bytes free_for_asker(Bytes device_free, Bytes asker_reserved, Bytes asker_active) {
    return saturating_add(device_free, asker_reserved > asker_active ? asker_reserved - asker_active : 0);
}

Bytes published_reserve(Bytes base_reserve, Bytes unseen_by_asker, Bytes device_total) {
    const auto cap = static_cast<Bytes>(static_cast<double>(device_total) * 0.75);
    return std::min(saturating_add(base_reserve, unseen_by_asker), std::max(cap, base_reserve));
}

}  // namespace comfy
