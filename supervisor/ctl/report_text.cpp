#include "supervisor/ctl/report_text.hpp"

#include "shared/byte_size.hpp"
#include "supervisor/ctl/report_format.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace comfy::ctl {

namespace {

// A plain text table: columns padded to their widest cell, two spaces apart; numeric
// columns right-aligned. A row with fewer cells than columns ends in a note that spans the
// rest of the row (such as a busy record's). A line wider than `max_width` has its last
// cell cut, ending in "...", but never to fewer than kMinLastCell characters.
class Table {
public:
    Table(std::vector<std::string> headers, std::vector<bool> right_aligned)
        : headers_(std::move(headers)), right_(std::move(right_aligned)) {}

    // 1 to headers.size() cells.
    void add(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }

    static constexpr std::size_t kMinLastCell = 16;

    std::string render(std::size_t max_width = SIZE_MAX) const {
        std::vector<std::size_t> width(headers_.size());
        for (std::size_t c = 0; c < headers_.size(); ++c) width[c] = headers_[c].size();
        for (const auto& row : rows_) {
            // A short row's last cell is a note; it does not widen its column.
            const std::size_t columns = row.size() == headers_.size() ? row.size() : row.size() - 1;
            for (std::size_t c = 0; c < columns; ++c) width[c] = std::max(width[c], row[c].size());
        }
        std::string out;
        auto line = [&](const std::vector<std::string>& cells) {
            std::string text;
            for (std::size_t c = 0; c < cells.size(); ++c) {
                if (c > 0) text += "  ";
                const bool note = cells.size() < headers_.size() && c + 1 == cells.size();
                const std::size_t pad = note ? 0 : width[c] - cells[c].size();
                if (right_[c]) text.append(pad, ' ');
                text += cells[c];
                if (!right_[c]) text.append(pad, ' ');
            }
            while (!text.empty() && text.back() == ' ') text.pop_back();
            std::size_t last_cell = 0;  // where the last column starts
            for (std::size_t c = 0; c + 1 < headers_.size(); ++c) last_cell += width[c] + 2;
            const std::size_t cut = std::max(max_width, last_cell + kMinLastCell);
            if (text.size() > cut) text = text.substr(0, cut - 3) + "...";
            out += text + "\n";
        };
        line(headers_);
        for (const auto& row : rows_) line(row);
        return out;
    }

private:
    std::vector<std::string> headers_;
    std::vector<bool> right_;
    std::vector<std::vector<std::string>> rows_;
};

std::string title(const SegmentReport& report) {
    return "instance " + report.instance + ": segment " + report.segment + ", supervisor pid " +
           std::to_string(report.supervisor_pid) + ", " + std::to_string(report.participant_slots) + " slots\n";
}

std::string slot_text(std::uint32_t slot) { return std::to_string(slot); }

std::string name_text(const std::string& name) { return name.empty() ? "-" : name; }

}  // namespace

std::string workers_text(const SegmentReport& report, std::uint64_t now_ms) {
    std::string out = title(report);
    if (report.workers.empty()) return out + "no participants\n";
    Table table({"SLOT", "NAME", "KIND", "PID", "GEN", "STATE", "RESTARTS", "LAST EXIT", "STARTED"},
                {true, false, false, true, true, false, true, false, true});
    // Each participant's note (why it failed, or a warning) under the table: the one cell
    // of any length, whole.
    std::string notes;
    for (const auto& row : report.workers) {
        if (row.busy) {
            table.add({slot_text(row.slot), "busy: the record was being written on every try; run again"});
            continue;
        }
        // A callback that lasts (a pack's function that does not return) says so, and how long;
        // a note says there is more under the table.
        const std::string state = row.state + (row.deaf ? " (deaf)" : "") +
                                  (row.in_callback ? " (callback, " + age_text(row.busy_since_ms, now_ms) + ")" : "") +
                                  (row.note.empty() ? "" : " (!)");
        table.add({slot_text(row.slot), name_text(row.name), row.kind, std::to_string(row.pid), std::to_string(row.generation),
                   state, std::to_string(row.restarts), exit_text(row.last_exit_status, row.last_exit_signal),
                   age_text(row.started_at_ms, now_ms)});
        if (!row.note.empty()) notes += "(!) " + name_text(row.name) + ": " + row.note + "\n";
    }
    return out + table.render() + notes;
}

std::string census_text(const SegmentReport& report) {
    std::string out = title(report);
    const auto& device = report.device;
    if (device.total_bytes != 0) {
        out += "device: simulated, total " + format_byte_size(device.total_bytes) + ", used " +
               format_byte_size(device.used_bytes) + ", free " + format_byte_size(device.free_bytes.value_or(0)) + "\n";
    } else {
        out += "device: real (its size is not in the segment), used by participants " +
               format_byte_size(device.used_bytes) + "\n";
    }
    if (report.census.empty()) return out + "no participants\n";
    // Fits 100 columns for a handful of packs: the pin ceiling and errors, the active parts
    // of evictions and of the allocator, churn and the prompt epoch are in --json.
    Table table({"SLOT", "NAME", "GEN", "STATUS", "DEVICE", "PINNED", "EVICTED", "ALLOC", "CAST", "RSS", "NODE", "BEAT"},
                {true, false, true, false, true, true, true, true, true, true, true, true});
    for (const auto& row : report.census) {
        const bool known = figures_known(row.status);
        const bool participant_known = !row.participant_busy;
        const CensusRecord& c = row.census;
        auto value = [&](std::string text) { return known ? text : std::string("-"); };
        table.add({slot_text(row.slot), participant_known ? name_text(row.name) : "-",
                   participant_known ? std::to_string(row.generation) : "-", status_name(row.status),
                   value(format_byte_size(c.device_used_bytes)), value(format_byte_size(c.pinned_bytes)),
                   value(format_byte_size(c.bytes_evicted)), value(format_byte_size(c.allocator_reserved)),
                   value(format_byte_size(c.cast_buffer_bytes)), value(format_byte_size(c.resident_set_bytes)),
                   value(std::to_string(c.last_node)),
                   row.status == RecordStatus::busy ? std::string("-") : std::to_string(row.heartbeat)});
    }
    return out + table.render();
}

std::string ledger_text(const SegmentReport& report) {
    std::string out = title(report);
    if (report.ledger.empty()) return out + "no models on any device\n";
    // The model's name last: the one cell of any length, it makes no other column wider and
    // is cut where the line would pass 100 columns (whole in --json). The owner's slot, the
    // device and the dynamic flag, which leave it little room, are in --json.
    Table table({"ROW", "OWNER", "GEN", "MODEL", "LOADED / TOTAL", "REFS", "USED", "STATUS", "NAME"},
                {true, false, true, true, true, true, false, false, false});
    for (const auto& row : report.ledger) {
        if (row.busy) {
            table.add({std::to_string(row.row), "-", "-", "-", "-", "-", "-", "busy", "-"});
            continue;
        }
        const std::string loaded = row.loaded_bytes ? format_byte_size(*row.loaded_bytes) : std::string("unknown");
        table.add({std::to_string(row.row), name_text(row.owner), std::to_string(row.owner_generation),
                   std::to_string(row.model_id), loaded + " / " + format_byte_size(row.total_bytes),
                   std::to_string(row.references), row.currently_used ? "yes" : "no", row.valid ? "ok" : "invalid",
                   name_text(row.name)});
    }
    return out + table.render(100);
}

}  // namespace comfy::ctl
