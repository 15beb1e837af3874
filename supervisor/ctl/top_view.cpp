#include "supervisor/ctl/top_view.hpp"

#include "shared/byte_size.hpp"
#include "supervisor/ctl/report_format.hpp"

#include <algorithm>
#include <charconv>
#include <string_view>
#include <vector>

namespace comfy::ctl {

namespace {

constexpr std::size_t kMinWidth = 60;
constexpr std::size_t kMinBar = 10;     // NAME and NODE narrow, to kMinColumn, to leave the bar this much
constexpr std::size_t kLeastBar = 3;    // and a narrower terminal has a bar down to this, then none
constexpr std::size_t kMinColumn = 4;
constexpr std::size_t kMaxColumn = 16;  // NAME and NODE as wide as their longest text, up to this
// SLOT STATE DEVICE PINNED CAST and the two spaces after each column, NAME's and NODE's included.
constexpr std::size_t kFixedColumns = 4 + 8 + 9 + 9 + 9 + 7 * 2;
constexpr std::size_t kTopModels = 8;  // the screen keeps room for the participants

std::string right(std::string text, std::size_t width) {
    return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

std::string left(std::string text, std::size_t width) {
    if (text.size() > width) text.resize(width);
    return text + std::string(width - text.size(), ' ');
}

// A bar of `part` against `whole`, `width` characters between brackets.
std::string bar(std::uint64_t part, std::uint64_t whole, std::size_t width) {
    const double share = whole == 0 ? 0.0 : std::min(1.0, static_cast<double>(part) / static_cast<double>(whole));
    auto filled = static_cast<std::size_t>(share * static_cast<double>(width) + 0.5);
    if (part > 0 && filled == 0) filled = 1;  // something on the device shows
    return "[" + std::string(filled, '#') + std::string(width - filled, '.') + "]";
}

std::string fit(std::string line, std::size_t width) {
    if (line.size() > width) line.resize(width);
    return line + "\n";
}

// The node a participant started last: "callback" and for how long while it serves the
// host's use of its objects, its name when the supervisor sent it, else the number its
// census reports (0 is none: a participant that reports no node), else "-".
std::string node_text(const SegmentReport& report, std::size_t i, std::uint64_t now_ms) {
    const bool read = i < report.workers.size() && !report.workers[i].busy;
    if (read && report.workers[i].in_callback) {
        return now_ms == 0 ? "callback" : "callback " + age_text(report.workers[i].busy_since_ms, now_ms);
    }
    if (read && !report.workers[i].last_node.empty()) return report.workers[i].last_node;
    const auto& row = report.census[i];
    return figures_known(row.status) && row.census.last_node != 0 ? "#" + std::to_string(row.census.last_node) : "-";
}

// NAME's and NODE's widths, and the bar's between its brackets (0: none): the bar takes
// what the columns leave of `width`.
struct Layout {
    std::size_t name = kMinColumn;
    std::size_t node = kMinColumn;
    std::size_t bar = 0;
};

Layout layout_of(const SegmentReport& report, std::size_t width, std::uint64_t now_ms) {
    Layout layout;
    for (std::size_t i = 0; i < report.census.size(); ++i) {
        layout.name = std::max(layout.name, std::min(report.census[i].name.size(), kMaxColumn));
        layout.node = std::max(layout.node, std::min(node_text(report, i, now_ms).size(), kMaxColumn));
    }
    const auto columns = [&] { return kFixedColumns + layout.name + layout.node; };
    while (columns() + kMinBar + 2 > width && (layout.name > kMinColumn || layout.node > kMinColumn)) {
        --(layout.name >= layout.node ? layout.name : layout.node);
    }
    // None at all rather than one cut at the edge.
    if (columns() + kLeastBar + 2 <= width) layout.bar = width - columns() - 2;
    return layout;
}

// The models loaded last (the ledger's front), each with its owner and name: which model
// the bars above are made of.
std::string models_block(const SegmentReport& report, std::size_t width) {
    if (report.ledger.empty()) return {};
    std::size_t owner_width = 5;
    for (const auto& row : report.ledger) {
        owner_width = std::max(owner_width, std::min<std::size_t>(row.owner.size(), 16));
    }
    const std::string heading =
        right("MODEL", 7) + "  " + left("OWNER", owner_width) + "  " + right("LOADED / TOTAL", 21) + "  NAME";
    std::string out = "\n" + fit(heading, width);
    std::size_t shown = 0;
    for (const auto& row : report.ledger) {
        if (row.busy) continue;
        if (shown == kTopModels) {
            out += fit("... and " + std::to_string(report.ledger.size() - shown) + " more (comfyctl ledger)", width);
            break;
        }
        const std::string loaded = row.loaded_bytes ? format_byte_size(*row.loaded_bytes) : std::string("unknown");
        out += fit(right(std::to_string(row.model_id), 7) + "  " + left(row.owner, owner_width) + "  " +
                       right(loaded + " / " + format_byte_size(row.total_bytes), 21) + "  " +
                       (row.name.empty() ? "-" : row.name),
                   width);
        ++shown;
    }
    return out;
}

}  // namespace

std::size_t columns_or(const char* columns, std::size_t otherwise) {
    if (columns == nullptr) return otherwise;
    const std::string_view text(columns);
    std::size_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    return error == std::errc{} && end == text.data() + text.size() && value >= 1 && value <= 1000 ? value : otherwise;
}

std::string top_frame(const SegmentReport& report, const TopContext& context) {
    const std::size_t width = std::max(context.width, kMinWidth);
    const auto& device = report.device;
    // A real device's size is not in the segment: the bars then measure against the sum.
    const std::uint64_t whole = device.total_bytes != 0 ? device.total_bytes : device.used_bytes;
    std::string out;
    std::string heading = "comfyctl top: instance " + report.instance + ", supervisor pid " +
                          std::to_string(report.supervisor_pid);
    if (heading.size() + context.clock.size() + 2 <= width) {
        heading += std::string(width - heading.size() - context.clock.size(), ' ') + context.clock;
    }
    out += fit(heading, width);
    std::string memory = device.total_bytes != 0 ? "device " + format_byte_size(device.total_bytes) + ", used " +
                                                       format_byte_size(device.used_bytes) + ", free " +
                                                       format_byte_size(device.free_bytes.value_or(0))
                                                 : "device real (its size is not in the segment), used " +
                                                       format_byte_size(device.used_bytes);
    memory += ", reserve " + (context.reserve_bytes ? format_byte_size(*context.reserve_bytes) : std::string("?"));
    out += fit(memory, width) + "\n";

    // SLOT NAME STATE DEVICE PINNED CAST NODE, two spaces apart, then the bar.
    const Layout layout = layout_of(report, width, context.now_ms);
    out += fit(right("SLOT", 4) + "  " + left("NAME", layout.name) + "  " + left("STATE", 8) + "  " +
                   right("DEVICE", 9) + "  " + right("PINNED", 9) + "  " + right("CAST", 9) + "  " +
                   left("NODE", layout.node) + (layout.bar > 0 ? "  DEVICE USE" : ""),
               width);
    if (report.census.empty()) out += "no participants\n";
    for (std::size_t i = 0; i < report.census.size(); ++i) {
        const auto& row = report.census[i];
        const bool read = i < report.workers.size() && !report.workers[i].busy;
        // Deaf says more than the state it is in (ready or busy): its memory is out of reach.
        const std::string state = !read ? "-" : report.workers[i].deaf ? "deaf" : report.workers[i].state;
        const bool known = figures_known(row.status);
        const CensusRecord& c = row.census;
        auto figure = [&](std::uint64_t bytes) { return known ? format_byte_size(bytes) : std::string("-"); };
        out += fit(right(std::to_string(row.slot), 4) + "  " +
                       left(row.participant_busy ? "-" : row.name, layout.name) + "  " + left(state, 8) + "  " +
                       right(figure(c.device_used_bytes), 9) + "  " + right(figure(c.pinned_bytes), 9) + "  " +
                       right(figure(c.cast_buffer_bytes), 9) + "  " +
                       left(node_text(report, i, context.now_ms), layout.node) +
                       (layout.bar > 0 ? "  " + bar(known ? c.device_used_bytes : 0, whole, layout.bar) : ""),
                   width);
    }
    out += models_block(report, width);
    out += "\nq quits\n";
    return out;
}

}  // namespace comfy::ctl
