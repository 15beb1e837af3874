#include "supervisor/arbiter/ledger.hpp"

#include <algorithm>
#include <utility>

namespace comfy::arbiter {

namespace {
Bytes clamp_loaded(Bytes loaded, Bytes total) { return loaded == kUnknownBytes ? kUnknownBytes : std::min(loaded, total); }
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
    set_name(record.name, entry.name);
    return record;
}

Ledger::Ledger(std::uint32_t capacity) : table_(capacity), free_rows_(capacity), changed_(capacity), order_(capacity) {}

std::optional<std::size_t> Ledger::apply_registered(std::uint32_t slot, std::uint32_t generation,
                                                    const ModelRegistered& report) {
    auto index = find(slot, generation, report.model_id);
    if (!index) {
        if (size() == capacity()) return std::nullopt;
        index = free_rows_.take();
        index_.insert(slot, generation, report.model_id, *index);
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
    entry.name = name_in(report.name);
    table_[*index] = std::move(entry);
    link(*index);
    changed_.insert(*index);
    return index;
}

template <class Edit>
bool Ledger::apply_report(std::size_t index, std::uint64_t sequence, Edit&& edit) {
    LedgerEntry& entry = *table_[index];
    if (sequence < entry.last_sequence) return false;
    unlink(index);
    entry.last_sequence = sequence;
    edit(entry);
    link(index);
    changed_.insert(index);
    return true;
}

bool Ledger::apply_residency(std::uint32_t slot, std::uint32_t generation, const ResidencyReceipt& report) {
    const auto index = find(slot, generation, report.model_id);
    return index && apply_report(*index, report.sequence, [&](LedgerEntry& entry) {
               entry.loaded_bytes = clamp_loaded(report.loaded_bytes, entry.total_bytes);
               entry.references = report.references;
               entry.currently_used = report.currently_used != 0;
               if (report.just_used != 0) entry.load_order = next_load_order_++;
           });
}

bool Ledger::apply_dropped(std::uint32_t slot, std::uint32_t generation, std::uint64_t model_id) {
    const auto index = find(slot, generation, model_id);
    if (!index) return false;
    erase(*index);
    return true;
}

bool Ledger::apply_unloaded(std::uint32_t slot, std::uint32_t generation, const UnloadReceipt& receipt) {
    if (receipt.deferred != 0) return false;
    const auto index = find(slot, generation, receipt.model_id);
    return index && apply_report(*index, receipt.sequence, [&](LedgerEntry& entry) {
               entry.loaded_bytes = clamp_loaded(receipt.loaded_bytes, entry.total_bytes);
           });
}

void Ledger::erase(std::size_t index) {
    if (!table_[index]) return;
    const LedgerEntry& entry = *table_[index];
    index_.erase(entry.owner_slot, entry.owner_generation, entry.model_id);
    unlink(index);
    clear_row(index);
}

void Ledger::clear_row(std::size_t index) {
    table_[index].reset();
    free_rows_.give_back(index);
    changed_.insert(index);
}

void Ledger::erase_owner(std::uint32_t slot) {
    index_.take_owner(slot, [this](std::size_t row) {
        // Its node in the order stays as a tombstone: no rebalance per entry.
        subtract(*table_[row]);
        order_.retire(row);
        clear_row(row);
    });
    ++order_version_;
}


std::optional<std::size_t> Ledger::find(std::uint32_t slot, std::uint32_t generation, std::uint64_t model_id) const {
    return index_.find(slot, generation, model_id);
}

Bytes Ledger::loaded_on(std::uint32_t device, std::optional<std::uint32_t> except_slot) const {
    const auto found = loaded_by_device_.find(device);
    Bytes sum = found == loaded_by_device_.end() ? 0 : found->second.bytes;
    if (!except_slot) return sum;
    index_.for_each_row(*except_slot, [&](std::size_t row) {
        const LedgerEntry& e = *table_[row];
        if (e.device == device) sum -= e.loaded_or_total();
    });
    return sum;
}

Ledger::Held Ledger::held_by(std::uint32_t slot) const {
    Held held;
    index_.for_each_row(slot, [&](std::size_t row) {
        ++held.models;
        held.loaded += table_[row]->loaded_or_total();
    });
    return held;
}

std::vector<std::size_t> Ledger::take_changed() { return changed_.take(); }

Ledger::OrderKey Ledger::order_key(const LedgerEntry& e) {
    // Ascending: complemented offload and load order put the larger figures first.
    return {e.device, ~e.offloaded_bytes(), e.references, e.total_bytes, ~e.load_order};
}

void Ledger::unlink(std::size_t index) {
    order_.erase(index);
    subtract(*table_[index]);
    ++order_version_;
}

void Ledger::subtract(const LedgerEntry& entry) {
    // Unsigned arithmetic: what link() added comes off exactly, whatever the sum.
    const auto sum = loaded_by_device_.find(entry.device);
    sum->second.bytes -= entry.loaded_or_total();
    if (--sum->second.entries == 0) loaded_by_device_.erase(sum);  // device ids come from reports: keep no empty ones
}

void Ledger::link(std::size_t index) {
    const LedgerEntry& entry = *table_[index];
    order_.insert(order_key(entry), index);
    DeviceSum& sum = loaded_by_device_[entry.device];
    sum.bytes += entry.loaded_or_total();
    ++sum.entries;
    ++order_version_;
}

}  // namespace comfy::arbiter
