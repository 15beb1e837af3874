#include "supervisor/ctl/events_text.hpp"

#include <algorithm>
#include <vector>

namespace comfy::ctl {

namespace {

constexpr std::size_t kTimeWidth = 12;  // 21:34:03.123
constexpr std::size_t kKindWidth = 10;  // "restarting", the longest kind
constexpr std::size_t kPackWidth = 8;
constexpr std::size_t kTextColumn = kTimeWidth + 2 + kKindWidth + 2 + kPackWidth + 2;

std::string field(const nlohmann::json& event, const char* name) {
    const auto found = event.find(name);
    return found != event.end() && found->is_string() ? found->get<std::string>() : std::string("?");
}

std::string padded(std::string text, std::size_t width) {
    if (text.size() < width) text.append(width - text.size(), ' ');
    return text;
}

// "2026-11-30T21:34:03.123Z" -> "21:34:03.123"; anything else as it is.
std::string time_of_day(const std::string& iso) {
    const auto t = iso.find('T');
    if (t == std::string::npos) return iso;
    std::string time = iso.substr(t + 1);
    if (!time.empty() && time.back() == 'Z') time.pop_back();
    return time;
}

// `text` in lines of at most `width` characters, broken at spaces where it can be.
std::vector<std::string> wrapped(const std::string& text, std::size_t width) {
    std::vector<std::string> lines;
    std::size_t start = 0;
    while (text.size() - start > width) {
        std::size_t cut = text.rfind(' ', start + width);
        if (cut == std::string::npos || cut <= start) cut = start + width;
        lines.push_back(text.substr(start, cut - start));
        start = cut;
        while (start < text.size() && text[start] == ' ') ++start;
    }
    lines.push_back(text.substr(start));
    return lines;
}

}  // namespace

std::string events_heading() {
    std::string line = padded("TIME (UTC)", kTimeWidth) + "  " + padded("KIND", kKindWidth) + "  " +
                       padded("PACK", kPackWidth) + "  WHAT";
    return line + "\n";
}

std::string event_text(const nlohmann::json& event, std::size_t width) {
    const std::string pack = field(event, "pack");
    std::string head = padded(time_of_day(field(event, "time")), kTimeWidth) + "  " +
                       padded(field(event, "kind"), kKindWidth) + "  " + padded(pack.empty() ? "-" : pack, kPackWidth) +
                       "  ";
    // A long pack name pushes the text along; the text's own width shrinks to match.
    const std::size_t column = std::max(head.size(), kTextColumn);
    const std::size_t room = width > column + 20 ? width - column : 20;
    std::string out;
    for (const auto& line : wrapped(field(event, "text"), room)) {
        out += (out.empty() ? head : std::string(column, ' ')) + line + "\n";
    }
    return out;
}

}  // namespace comfy::ctl
