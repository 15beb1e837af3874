#pragma once
// Byte sizes as people write them in config and pack files ("24GiB", "512 MiB", "100B")
// and as tools print them ("1.5 GiB", or exactly: "256MiB").
//
// Binary units only: B, KiB, MiB, GiB, TiB, PiB. "GB" is refused rather than guessed,
// because GPU memory sold as "24 GB" is 24 GiB, and reading it as 10^9 would quietly
// lose 7 % of the device.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace comfy {

// A whole number, then at most one space, then a unit (required: a bare number of bytes
// is written "100B", or as a JSON number by the caller). Nothing for any other text
// ("1.5GiB", "24GB", "24gib", "-1B", "1024"). A size too large for 64 bits saturates to
// UINT64_MAX, so that it fails the caller's range check with a clear message instead of
// reading as "not a size" or wrapping into a plausible one.
std::optional<std::uint64_t> parse_byte_size(std::string_view text);

// "0 B", "512 KiB", "1.5 GiB": the largest unit that keeps the number at least 1, with
// one decimal below 10. For people reading a table; not exact.
std::string format_byte_size(std::uint64_t bytes);

// The largest unit that divides `bytes` exactly, written as parse_byte_size reads it:
// 268435456 is "256MiB", 1000 is "1000B", 0 is "0B". For messages that quote a limit.
std::string format_byte_size_exact(std::uint64_t bytes);

}  // namespace comfy
