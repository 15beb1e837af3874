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
    read_owners();
    read_at_ = now;
    ++reads_;
    return rows_;
}

void LedgerMirror::read_owners() {
    owners_.assign(segment_.capacities().participants, Owner{});
    for (std::uint32_t slot = 0; slot < owners_.size(); ++slot) {
        ParticipantRecord record{};
        // A record mid-rewrite gives no name: the row is shown by its slot instead.
        if (segment_.participant(slot).record.read(record) != ipc::SeqlockRead::ok) continue;
        if (record.generation == 0 || !is_valid_name(record.name)) continue;
        owners_[slot] = {record.generation, std::string(name_in(record.name))};
    }
}

std::string_view LedgerMirror::owner_name(const LedgerRecord& row) const noexcept {
    // owner_slot is below the table's size: rows() keeps valid rows only.
    if (row.owner_slot >= owners_.size() || owners_[row.owner_slot].generation != row.owner_generation) return {};
    return owners_[row.owner_slot].name;
}

}  // namespace comfy::worker
