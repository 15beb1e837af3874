#pragma once
// What the release messages freed, by kind, as the workers measured it in their receipts;
// the receipts not believed; and the most one boundary release of each worker freed since
// its last admission request, so the log can show a load that fits only because a
// boundary release ran before it.
//
// A receipt is a participant's word. It counts only when it answers a release or an
// eviction asked of that life (lifecycle/answers_due.hpp), and then for no more than the
// participant could have freed: the device's memory, the pins asked for; sums saturate,
// so no number of receipts wraps a total. Every receipt refused, whole or in part, is
// counted (docs/METRICS.md, comfy_receipts_refused_total).

#include "shared/memory_arithmetic.hpp"
#include "shared/message_payloads.hpp"

#include <array>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace comfy::supervisor {

enum class ReleaseKind : std::size_t { node_boundary = 0, epoch_boundary, full, partial, pins };
inline constexpr std::size_t kReleaseKindCount = 5;

// The kind of a release message; nothing for a type that is no release.
std::optional<ReleaseKind> release_kind(MessageType type) noexcept;
// As the summary prints it: "node boundary", "epoch boundary", "full", "partial", "pins".
std::string_view to_string(ReleaseKind kind) noexcept;

struct ReleaseCount {
    std::uint32_t receipts = 0;  // saturates
    Bytes freed = 0;  // device bytes; host bytes unpinned for pins
};
using ReleaseCounts = std::array<ReleaseCount, kReleaseKindCount>;

// All kinds together.
Bytes total_freed(const ReleaseCounts& counts) noexcept;

// Receipts not counted, or not counted whole.
struct RefusedReceipts {
    std::uint64_t unasked = 0;       // answered nothing asked of that life (or answered it twice)
    std::uint64_t beyond_bound = 0;  // claimed more than could have been freed: counted up to that
};

class ReleaseTotals {
public:
    // Counts one receipt of the worker in `slot`, for a release asked of it, up to `bound`
    // bytes; nothing when it names no release type. Returns its kind and what was counted.
    struct Recorded {
        ReleaseKind kind;
        Bytes freed;
    };
    std::optional<Recorded> record(std::uint32_t slot, const ReleaseReceipt& receipt, Bytes bound);
    // What an eviction's receipt claims freed, up to `bound`, counting a refusal beyond it.
    Bytes bounded(Bytes freed, Bytes bound) noexcept;
    // A receipt that answered nothing asked: not counted at all.
    void refuse_unasked() noexcept { ++refused_.unasked; }
    const ReleaseCounts& counts() const noexcept { return counts_; }
    const RefusedReceipts& refused() const noexcept { return refused_; }
    // The most device bytes one node or epoch boundary release of `slot` freed since the
    // last call for it (or since it was forgotten). The most, not the sum: a buffer freed at
    // one boundary and allocated again by the next node would otherwise count twice.
    Bytes take_boundary_freed(std::uint32_t slot);
    // A new life in `slot` starts with nothing freed.
    void forget(std::uint32_t slot) { boundary_freed_.erase(slot); }

private:
    ReleaseCounts counts_{};
    RefusedReceipts refused_;
    std::map<std::uint32_t, Bytes> boundary_freed_;
};

// The log line for a load of `weights` whose admission `target` fits in `free` only because
// a boundary release of its worker gave `boundary_freed` back first; nothing when it would
// fit without it, or does not fit even with it.
std::optional<std::string> fit_by_boundary_release(const std::string& pack, Bytes weights, double target, Bytes free,
                                                   Bytes boundary_freed);

}  // namespace comfy::supervisor
