// The release totals keep a participant's word within bounds: a receipt counts no more
// than could have been freed, each one beyond is counted as refused, and no number of
// receipts wraps a total.
#include <catch2/catch.hpp>

#include "supervisor/memory/release_totals.hpp"

#include <limits>

using namespace comfy;
using comfy::supervisor::ReleaseTotals;

namespace {

ReleaseReceipt full_release(Bytes freed) {
    ReleaseReceipt receipt{};
    receipt.release_type = static_cast<std::uint16_t>(MessageType::full_release);
    receipt.bytes_freed = freed;
    return receipt;
}

}  // namespace

TEST_CASE("a receipt counts up to what could have been freed, and the refusal is counted") {
    ReleaseTotals totals;
    constexpr Bytes kDevice = 24 * kGiB;
    CHECK(totals.record(1, full_release(kMaxBytes), kDevice)->freed == kDevice);
    CHECK(totals.record(1, full_release(kGiB), kDevice)->freed == kGiB);
    CHECK(totals.counts()[static_cast<std::size_t>(supervisor::ReleaseKind::full)].freed == kDevice + kGiB);
    CHECK(totals.refused().beyond_bound == 1);
    CHECK(totals.bounded(3 * kGiB, 2 * kGiB) == 2 * kGiB);
    CHECK(totals.bounded(kGiB, 2 * kGiB) == kGiB);
    CHECK(totals.refused().beyond_bound == 2);
    totals.refuse_unasked();
    CHECK(totals.refused().unasked == 1);
}

TEST_CASE("release totals saturate instead of wrapping") {
    ReleaseTotals totals;
    constexpr Bytes kHuge = std::numeric_limits<Bytes>::max() / 3;
    for (int i = 0; i < 5; ++i) totals.record(1, full_release(kHuge), kHuge);
    const auto& full = totals.counts()[static_cast<std::size_t>(supervisor::ReleaseKind::full)];
    CHECK(full.freed == std::numeric_limits<Bytes>::max());
    CHECK(full.receipts == 5);
    CHECK(supervisor::total_freed(totals.counts()) == std::numeric_limits<Bytes>::max());
}
