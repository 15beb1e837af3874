#include "supervisor/memory/release_totals.hpp"

#include "shared/byte_size.hpp"

#include <algorithm>
#include <limits>

namespace comfy::supervisor {

std::optional<ReleaseKind> release_kind(MessageType type) noexcept {
    switch (type) {
        case MessageType::release_node_boundary: return ReleaseKind::node_boundary;
        case MessageType::cast_epoch_boundary: return ReleaseKind::epoch_boundary;
        case MessageType::full_release: return ReleaseKind::full;
        case MessageType::partial_release: return ReleaseKind::partial;
        case MessageType::release_pins: return ReleaseKind::pins;
        default: return std::nullopt;
    }
}

std::string_view to_string(ReleaseKind kind) noexcept {
    switch (kind) {
        case ReleaseKind::node_boundary: return "node boundary";
        case ReleaseKind::epoch_boundary: return "epoch boundary";
        case ReleaseKind::full: return "full";
        case ReleaseKind::partial: return "partial";
        case ReleaseKind::pins: return "pins";
    }
    return "?";
}

Bytes total_freed(const ReleaseCounts& counts) noexcept {
    Bytes sum = 0;
    for (const auto& count : counts) sum = saturating_add(sum, count.freed);
    return sum;
}

std::optional<ReleaseTotals::Recorded> ReleaseTotals::record(std::uint32_t slot, const ReleaseReceipt& receipt,
                                                             Bytes bound) {
    const auto kind = release_kind(static_cast<MessageType>(receipt.release_type));
    if (!kind) return std::nullopt;
    const Bytes freed = bounded(receipt.bytes_freed, bound);
    ReleaseCount& count = counts_[static_cast<std::size_t>(*kind)];
    if (count.receipts < std::numeric_limits<std::uint32_t>::max()) ++count.receipts;
    count.freed = saturating_add(count.freed, freed);
    if (*kind == ReleaseKind::node_boundary || *kind == ReleaseKind::epoch_boundary) {
        Bytes& most = boundary_freed_[slot];
        most = std::max(most, freed);
    }
    return Recorded{*kind, freed};
}

Bytes ReleaseTotals::bounded(Bytes freed, Bytes bound) noexcept {
    if (freed <= bound) return freed;
    ++refused_.beyond_bound;
    return bound;
}

Bytes ReleaseTotals::take_boundary_freed(std::uint32_t slot) {
    const auto found = boundary_freed_.find(slot);
    if (found == boundary_freed_.end()) return 0;
    const Bytes freed = found->second;
    boundary_freed_.erase(found);
    return freed;
}

std::optional<std::string> fit_by_boundary_release(const std::string& pack, Bytes weights, double target, Bytes free,
                                                   Bytes boundary_freed) {
    const Bytes without = free - std::min(free, boundary_freed);
    // Upstream's comparison: short while target - free > 0.
    if (memory_to_free(target, free) > 0 || !(memory_to_free(target, without) > 0)) return std::nullopt;
    return pack + ": a load of " + format_byte_size(weights) + " needs " + format_byte_size(whole_bytes_up(target)) +
           " free and finds " +
           format_byte_size(free) + "; it fits only because a boundary release before it freed " +
           format_byte_size(boundary_freed) + " (" + format_byte_size(without) + " free without it)";
}

}  // namespace comfy::supervisor
