#include "supervisor/arbiter/ledger.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <ranges>
#include <utility>

namespace comfy::arbiter {

namespace {
Bytes clamp_loaded(Bytes loaded, Bytes total) { return loaded == kUnknownBytes ? kUnknownBytes : std::min(loaded, total); }

// The index entries of the participant in `slot`, all generations: the index is ordered by
// slot first, so they are one contiguous range.
template <class Index>
auto owner_range(Index& index, std::uint32_t slot) {
    constexpr auto kLastGeneration = std::numeric_limits<std::uint32_t>::max();
    constexpr auto kLastModel = std::numeric_limits<std::uint64_t>::max();
    return std::ranges::subrange(index.lower_bound({slot, 0, 0}), index.upper_bound({slot, kLastGeneration, kLastModel}));
}
}  // namespace

LedgerRecord to_record(const LedgerEntry& entry) {
    LedgerRecord record{};
    record.model_id = entry.model_id;
    record.weights_id = entry.weights_id;
    record.total_bytes = entry.total_bytes;
    record.loaded_bytes = entry.loaded_bytes;
    record.load_order = entry.load_order;
    record.last_sequence = entry.last_sequence;
    record.owner_slot = entry.owner_slot;
    record.owner_generation = entry.owner_generation;
    record.device = entry.device;
    record.references = entry.references;
    record.kind = entry.kind;
    record.currently_used = entry.currently_used ? 1 : 0;
    record.dynamic = entry.dynamic ? 1 : 0;
    return record;
}

Ledger::Ledger(std::uint32_t capacity) : table_(capacity), changed_(capacity), order_at_(capacity) {
    // Sized once, as ChangedRows, so that giving back an owner's rows never reallocates.
    freed_rows_.reserve(capacity);
}

Ledger::Ledger(const Ledger& other)
    : table_(other.table_),
      index_(other.index_),
      never_used_(other.never_used_),
      freed_rows_(other.freed_rows_),
      loaded_by_device_(other.loaded_by_device_),
      next_load_order_(other.next_load_order_),
      changed_(other.changed_),
      order_(other.order_),
      order_at_(other.order_at_.size()),
      order_version_(other.order_version_) {
    freed_rows_.reserve(table_.size());
    repoint_order();
}

Ledger& Ledger::operator=(const Ledger& other) {
    if (this != &other) *this = Ledger(other);
    return *this;
}

void Ledger::repoint_order() {
    // The copy's order holds the same rows in the same sequence.
    for (auto it = order_.begin(); it != order_.end(); ++it) order_at_[it->second] = it;
}

std::size_t Ledger::take_free_row() {
    // Every freed row lies below never_used_, so the heap's top, when there is one, is the
    // lowest unused row.
    if (freed_rows_.empty()) return never_used_++;
    std::pop_heap(freed_rows_.begin(), freed_rows_.end(), std::greater<>());
    const std::size_t row = freed_rows_.back();
    freed_rows_.pop_back();
    return row;
}

void Ledger::free_row(std::size_t index) {
    freed_rows_.push_back(index);
    std::push_heap(freed_rows_.begin(), freed_rows_.end(), std::greater<>());
}

std::optional<std::size_t> Ledger::apply_registered(std::uint32_t slot, std::uint32_t generation,
                                                    const ModelRegistered& report) {
    auto index = find(slot, generation, report.model_id);
    if (!index) {
        if (size() == capacity()) return std::nullopt;
        index = take_free_row();
        index_[{slot, generation, report.model_id}] = *index;
    } else {
        unlink(*index);
    }
    LedgerEntry entry;
    entry.owner_slot = slot;
    entry.owner_generation = generation;
    entry.model_id = report.model_id;
    entry.weights_id = report.weights_id;
    entry.kind = report.kind;
    entry.device = report.device;
    entry.total_bytes = report.total_bytes;
    entry.loaded_bytes = clamp_loaded(report.loaded_bytes, report.total_bytes);
    entry.dynamic = report.dynamic != 0;
    entry.references = 1;
    entry.load_order = next_load_order_++;
    table_[*index] = entry;
    link(*index);
    changed_.insert(*index);
    return index;
}

bool Ledger::apply_residency(std::uint32_t slot, std::uint32_t generation, const ResidencyReceipt& report) {
    const auto index = find(slot, generation, report.model_id);
    if (!index) return false;
    LedgerEntry& entry = *table_[*index];
    if (report.sequence < entry.last_sequence) return false;
    unlink(*index);
    entry.last_sequence = report.sequence;
    entry.loaded_bytes = clamp_loaded(report.loaded_bytes, entry.total_bytes);
    entry.references = report.references;
    entry.currently_used = report.currently_used != 0;
    link(*index);
    changed_.insert(*index);
    return true;
}

bool Ledger::apply_dropped(std::uint32_t slot, std::uint32_t generation, std::uint64_t model_id) {
    const auto index = find(slot, generation, model_id);
    if (!index) return false;
    erase(*index);
    return true;
}

void Ledger::apply_unloaded(std::size_t index, Bytes freed) {
    unlink(index);
    LedgerEntry& entry = *table_[index];
    const Bytes loaded = entry.loaded_or_total();
    entry.loaded_bytes = loaded - std::min(freed, loaded);
    link(index);
    changed_.insert(index);
}

void Ledger::erase(std::size_t index) {
    if (!table_[index]) return;
    const LedgerEntry& entry = *table_[index];
    index_.erase({entry.owner_slot, entry.owner_generation, entry.model_id});
    clear_row(index);
}

void Ledger::clear_row(std::size_t index) {
    unlink(index);
    table_[index].reset();
    free_row(index);
    changed_.insert(index);
}

void Ledger::erase_owner(std::uint32_t slot) {
    auto owned = owner_range(index_, slot);
    for (auto it = owned.begin(); it != owned.end();) {
        const std::size_t row = it->second;
        it = index_.erase(it);
        clear_row(row);
    }
}


std::optional<std::size_t> Ledger::find(std::uint32_t slot, std::uint32_t generation, std::uint64_t model_id) const {
    const auto found = index_.find({slot, generation, model_id});
    if (found == index_.end()) return std::nullopt;
    return found->second;
}

Bytes Ledger::loaded_on(std::uint32_t device, std::optional<std::uint32_t> except_slot) const {
    const auto found = loaded_by_device_.find(device);
    Bytes sum = found == loaded_by_device_.end() ? 0 : found->second.bytes;
    if (!except_slot) return sum;
    for (const auto& [key, row] : owner_range(index_, *except_slot)) {
        const LedgerEntry& e = *table_[row];
        if (e.device == device) sum -= e.loaded_or_total();
    }
    return sum;
}

std::vector<std::size_t> Ledger::take_changed() { return changed_.take(); }

Ledger::OrderKey Ledger::order_key(const LedgerEntry& e) {
    // Ascending: complemented offload and load order put the larger figures first.
    return {e.device, ~e.offloaded_bytes(), e.references, e.total_bytes, ~e.load_order};
}

void Ledger::unlink(std::size_t index) {
    const LedgerEntry& entry = *table_[index];
    order_.erase(order_at_[index]);
    // Unsigned arithmetic: what link() added comes off exactly, whatever the sum.
    const auto sum = loaded_by_device_.find(entry.device);
    sum->second.bytes -= entry.loaded_or_total();
    if (--sum->second.entries == 0) loaded_by_device_.erase(sum);  // device ids come from reports: keep no empty ones
    ++order_version_;
}

void Ledger::link(std::size_t index) {
    const LedgerEntry& entry = *table_[index];
    order_at_[index] = order_.insert({order_key(entry), index}).first;
    DeviceSum& sum = loaded_by_device_[entry.device];
    sum.bytes += entry.loaded_or_total();
    ++sum.entries;
    ++order_version_;
}

}  // namespace comfy::arbiter
