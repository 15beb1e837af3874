#pragma once
// Byte sizes as people write them in config files ("24GiB", "512 MiB", "100B") and as
// tools print them ("1.5 GiB").

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace comfy {

// Parses a whole number with an optional binary unit (B, KiB, MiB, GiB, TiB), with or
// without a space before the unit. Nothing on overflow or any other text.
std::optional<std::uint64_t> parse_byte_size(std::string_view text);

// "0 B", "512 KiB", "1.5 GiB": the largest unit that keeps the number at least 1.
std::string format_byte_size(std::uint64_t bytes);

}  // namespace comfy
