#include "worker/ledger_mirror.hpp"

#include <algorithm>

namespace comfy::worker {

std::uint64_t LedgerMirror::generation() const noexcept {
    // Acquire: pairs with the supervisor's release after its row writes, so that the rows
    // read after this load are those of this generation or newer.
    return segment_.ledger_generation().value.load(std::memory_order_acquire);
}

const std::vector<LedgerRecord>& LedgerMirror::rows() {
    const std::uint64_t now = generation();
    if (read_at_ == now) return rows_;
    rows_.clear();
    const std::uint32_t participants = segment_.capacities().participants;
    for (std::uint32_t index = 0; index < segment_.capacities().ledger_entries; ++index) {
        LedgerRecord record{};
        // A row mid-rewrite is left out: its write ends with a new generation.
        if (segment_.ledger(index).entry.read(record) != ipc::SeqlockRead::ok) continue;
        if (record.owner_generation == 0 || !is_valid_ledger_record(record, participants)) continue;
        rows_.push_back(record);
    }
    std::stable_sort(rows_.begin(), rows_.end(),
                     [](const LedgerRecord& a, const LedgerRecord& b) { return a.load_order > b.load_order; });
    read_at_ = now;
    ++reads_;
    return rows_;
}

}  // namespace comfy::worker
