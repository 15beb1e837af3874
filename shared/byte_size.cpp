#include "shared/byte_size.hpp"

#include <array>
#include <charconv>
#include <cstdio>

namespace comfy {

namespace {
struct Unit {
    std::string_view name;
    unsigned shift;
};
constexpr std::array<Unit, 5> kUnits{{{"B", 0}, {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}}};
}  // namespace

std::optional<std::uint64_t> parse_byte_size(std::string_view text) {
    std::uint64_t number = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
    if (ec != std::errc{} || end == text.data()) return std::nullopt;
    std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
    if (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
    if (unit.empty()) return number;
    for (const auto& u : kUnits) {
        if (unit != u.name) continue;
        if (u.shift > 0 && number > (~std::uint64_t{0} >> u.shift)) return std::nullopt;
        return number << u.shift;
    }
    return std::nullopt;
}

std::string format_byte_size(std::uint64_t bytes) {
    std::size_t index = 0;
    while (index + 1 < kUnits.size() && bytes >= (std::uint64_t{1} << kUnits[index + 1].shift)) ++index;
    if (index == 0) return std::to_string(bytes) + " B";
    const double value = static_cast<double>(bytes) / static_cast<double>(std::uint64_t{1} << kUnits[index].shift);
    char text[32];
    std::snprintf(text, sizeof text, value < 10 ? "%.1f %s" : "%.0f %s", value, kUnits[index].name.data());
    return text;
}

}  // namespace comfy
