#include "shared/byte_size.hpp"

#include <array>
#include <charconv>
#include <cstdio>
#include <limits>
#include <system_error>

namespace comfy {

namespace {

struct Unit {
    std::string_view name;
    unsigned shift;  // the unit is 2^shift bytes
};
constexpr std::array<Unit, 6> kUnits{{{"B", 0}, {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}, {"PiB", 50}}};

}  // namespace

std::optional<std::uint64_t> parse_byte_size(std::string_view text) {
    std::uint64_t count = 0;
    const char* const end = text.data() + text.size();
    const auto [digits_end, error] = std::from_chars(text.data(), end, count);
    if (digits_end == text.data()) return std::nullopt;  // no digits (from_chars takes no sign or space)
    std::string_view unit(digits_end, static_cast<std::size_t>(end - digits_end));
    if (unit.starts_with(' ')) unit.remove_prefix(1);
    for (const auto& [name, shift] : kUnits) {
        if (unit != name) continue;
        constexpr auto most = std::numeric_limits<std::uint64_t>::max();
        if (error == std::errc::result_out_of_range || count > (most >> shift)) return most;
        return count << shift;
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

std::string format_byte_size_exact(std::uint64_t bytes) {
    // "B" divides every size, so the search ends there at the latest; 0 is "0B".
    std::size_t index = kUnits.size() - 1;
    while (index > 0 && (bytes == 0 || bytes % (std::uint64_t{1} << kUnits[index].shift) != 0)) --index;
    return std::to_string(bytes >> kUnits[index].shift) + std::string(kUnits[index].name);
}

}  // namespace comfy
