#pragma once
// The machine-wide current_loaded_models: one stand-in entry per model a participant
// holds on a device, with upstream's report rules. Entries live at fixed table indices
// (the segment's ledger table); the load order is a counter, larger meaning more recent.

#include "shared/memory_arithmetic.hpp"
#include "shared/message_payloads.hpp"
#include "shared/records.hpp"
#include "supervisor/arbiter/changed_rows.hpp"
#include "supervisor/arbiter/free_rows.hpp"
#include "supervisor/arbiter/owner_index.hpp"
#include "supervisor/arbiter/row_order.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace comfy::arbiter {

struct LedgerEntry {
    std::uint32_t owner_slot = 0;
    std::uint32_t owner_generation = 0;
    std::uint64_t model_id = 0;
    std::uint64_t weights_id = 0;
    std::uint16_t kind = 0;
    std::uint32_t device = 0;
    Bytes total_bytes = 0;
    Bytes loaded_bytes = kUnknownBytes;  // unknown until reported; never read as zero
    std::uint32_t references = 0;
    bool currently_used = true;
    bool dynamic = false;
    std::uint64_t load_order = 0;
    std::uint64_t last_sequence = 0;
    std::string name;  // as its owner reported it: printable, maybe empty

    bool loaded_known() const noexcept { return loaded_bytes != kUnknownBytes; }
    // Loaded bytes, counting an unknown figure as fully loaded (the cautious reading).
    Bytes loaded_or_total() const noexcept { return loaded_known() ? loaded_bytes : total_bytes; }
    Bytes offloaded_bytes() const noexcept { return total_bytes - loaded_or_total(); }
};

// The entry as the segment's ledger table holds it, for comfyctl and the metrics.
LedgerRecord to_record(const LedgerEntry& entry);

class Ledger {
public:
    explicit Ledger(std::uint32_t capacity);

    // A participant reports a model. A second report of the same model replaces the
    // first and moves it to the front of the load order. Its table row; nothing when the
    // table is full.
    std::optional<std::size_t> apply_registered(std::uint32_t slot, std::uint32_t generation, const ModelRegistered& report);
    // Residency: replaces the loaded figure unless the sequence is strictly older than
    // the last applied (then the whole report is dropped); clamped to [0, total]. A
    // report of a model a load just used moves it to the front of the load order.
    // False when the report was dropped or names no known model.
    bool apply_residency(std::uint32_t slot, std::uint32_t generation, const ResidencyReceipt& report);
    bool apply_dropped(std::uint32_t slot, std::uint32_t generation, std::uint64_t model_id);
    // An unload receipt's figure: what stays loaded, under the same sequence rule as a
    // residency report (so the freed bytes never count twice, whichever came first). A
    // deferred receipt changes nothing. False when nothing was applied.
    bool apply_unloaded(std::uint32_t slot, std::uint32_t generation, const UnloadReceipt& receipt);
    void erase(std::size_t index);
    // Everything a participant held (it died: its memory went with it). Costs its own
    // entries only (O(m), a heap push each), not a walk of the table nor a rebalance per
    // entry: a death must not stall the loop.
    void erase_owner(std::uint32_t slot);

    std::optional<std::size_t> find(std::uint32_t slot, std::uint32_t generation, std::uint64_t model_id) const;
    const std::optional<LedgerEntry>& at(std::size_t index) const { return table_[index]; }
    std::size_t capacity() const noexcept { return table_.size(); }
    std::size_t size() const noexcept { return index_.size(); }
    // Whether a report of `model_id` keeps its owner within `quota` rows: it is in a row
    // already (a second report replaces the first), or the owner holds fewer.
    bool within_quota(std::uint32_t slot, std::uint32_t generation, std::uint64_t model_id, std::size_t quota) const {
        return find(slot, generation, model_id) || index_.size(slot) < quota;
    }
    // Sum of loaded bytes (unknown counted as total) over entries on `device`, leaving
    // out those of the participant in `except_slot` when one is given. A running sum per
    // device, less the except_slot's own entries: never a walk of the table.
    Bytes loaded_on(std::uint32_t device, std::optional<std::uint32_t> except_slot = std::nullopt) const;
    // What the participant in `slot` holds: its entries, and their loaded bytes (unknown
    // counted as total). A walk of its own entries alone.
    struct Held {
        std::size_t models = 0;
        Bytes loaded = 0;
    };
    Held held_by(std::uint32_t slot) const;

    // Indices changed since the last call, ascending, for publishing to the segment.
    std::vector<std::size_t> take_changed();

    // Upstream's free_memory order, kept up to date as entries change, so an admission
    // walks it from the front instead of sorting thousands of entries: per device, the
    // most offloaded first, then fewest references, smaller total, most recently loaded.
    // It may hold tombstones of erased entries (RowOrder::retire): a walker skips a row
    // whose table entry is empty.
    using OrderKey = std::tuple<std::uint32_t, Bytes, std::uint32_t, Bytes, std::uint64_t>;
    using Order = RowOrder<OrderKey>::Set;
    const Order& order() const noexcept { return order_.set(); }
    // Changes whenever the order does, so a walk over it knows whether it may resume.
    std::uint64_t order_version() const noexcept { return order_version_; }
    static OrderKey order_key(const LedgerEntry& entry);

private:
    // Every change to an entry goes between these two, so order_ and the per-device
    // sums stay right.
    void unlink(std::size_t index);
    void link(std::size_t index);
    // Takes the entry off its device's running sum.
    void subtract(const LedgerEntry& entry);
    // An owner's report of a live entry under `sequence`: `edit` applied between unlink
    // and link, the row marked changed. False (nothing done) when the sequence is older.
    template <class Edit>
    bool apply_report(std::size_t index, std::uint64_t sequence, Edit&& edit);
    // Empties a row already out of index_ and the order.
    void clear_row(std::size_t index);

    std::vector<std::optional<LedgerEntry>> table_;
    OwnerIndex index_;
    FreeRows free_rows_;
    struct DeviceSum {
        Bytes bytes = 0;  // loaded_or_total() summed
        std::size_t entries = 0;
    };
    std::map<std::uint32_t, DeviceSum> loaded_by_device_;
    std::uint64_t next_load_order_ = 1;
    ChangedRows changed_;
    RowOrder<OrderKey> order_;
    std::uint64_t order_version_ = 0;
};

}  // namespace comfy::arbiter
