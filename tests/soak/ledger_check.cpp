#include "tests/soak/ledger_check.hpp"

#include "shared/segment_layout.hpp"

#include <map>

namespace comfy::soak {

namespace {

bool up(const ctl::WorkerRow& row) { return row.state == "ready" || row.state == "busy"; }

}  // namespace

std::vector<std::string> ledger_disagreements(const ctl::SegmentReport& report) {
    std::vector<std::string> found;
    std::map<std::uint32_t, const ctl::WorkerRow*> by_slot;
    for (const auto& row : report.workers) {
        if (row.busy) {
            found.push_back("participant slot " + std::to_string(row.slot) + " was mid-write at every read");
        } else {
            by_slot[row.slot] = &row;
        }
    }
    std::map<std::uint32_t, std::uint64_t> loaded;  // by owner slot
    for (const auto& row : report.ledger) {
        const std::string which = "ledger row " + std::to_string(row.row);
        if (row.busy || !row.valid) {
            found.push_back(which + (row.busy ? " was mid-write at every read" : " holds an impossible value"));
            continue;
        }
        const auto owner = by_slot.find(row.owner_slot);
        const std::string whose = " (model " + std::to_string(row.model_id) + " of slot " + std::to_string(row.owner_slot) +
                                  ", generation " + std::to_string(row.owner_generation) + ")";
        if (owner == by_slot.end() || !owner->second->live || owner->second->generation != row.owner_generation) {
            found.push_back(which + whose + " outlived its owner: the slot is " +
                            (owner == by_slot.end() ? std::string("empty")
                                                    : owner->second->state + " in generation " +
                                                          std::to_string(owner->second->generation)));
            continue;
        }
        if (!row.loaded_bytes) {
            found.push_back(which + whose + " has no loaded figure yet");
            continue;
        }
        loaded[row.owner_slot] += *row.loaded_bytes;
    }
    for (const auto& census : report.census) {
        const auto owner = by_slot.find(census.slot);
        if (owner == by_slot.end() || !up(*owner->second) || census.status != ctl::RecordStatus::ok) continue;
        const auto& c = census.census;
        const std::uint64_t in_ledger = loaded.count(census.slot) ? loaded[census.slot] : 0;
        const std::uint64_t models = c.device_used_bytes - std::min(c.device_used_bytes, c.cast_buffer_bytes);
        if (in_ledger != models || c.cast_buffer_bytes > c.device_used_bytes) {
            found.push_back(owner->second->name + " (slot " + std::to_string(census.slot) + ", generation " +
                            std::to_string(owner->second->generation) + "): the ledger has " +
                            std::to_string(in_ledger) + " bytes of its models loaded, its census " +
                            std::to_string(c.device_used_bytes) + " device bytes with " +
                            std::to_string(c.cast_buffer_bytes) + " in cast buffers");
        }
    }
    return found;
}

std::optional<ctl::SegmentReport> read_instance(const std::string& instance) {
    try {
        const auto segment = attach_segment(instance);
        return ctl::read_report(instance, segment);
    } catch (const ipc::SegmentError&) {
        return std::nullopt;
    }
}

}  // namespace comfy::soak
