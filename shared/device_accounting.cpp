#include "shared/device_accounting.hpp"

#include "shared/message_payloads.hpp"

namespace comfy {

std::uint64_t simulated_device_used(const SegmentView& view) {
    std::uint64_t used = 0;
    for (std::uint32_t slot = 0; slot < view.capacities().participants; ++slot) {
        CensusRecord record{};
        // A record that stays busy through every retry belongs to a writer stopped
        // mid-write; counting it as 0 could overcommit, so count it as the worst case.
        if (view.census(slot).census.read(record) != ipc::SeqlockRead::ok) return view.device_total_bytes();
        if (record.device_used_bytes <= kMaxBytes) used += record.device_used_bytes;
    }
    return used;
}

}  // namespace comfy
