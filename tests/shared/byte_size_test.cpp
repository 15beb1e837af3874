// Byte sizes: parsed with binary units only (B to PiB, one optional space), saturating
// when too large for 64 bits; formatted roughly for tables and exactly for messages.
#include <catch2/catch.hpp>

#include "shared/byte_size.hpp"

#include <cstdint>
#include <string>

using comfy::format_byte_size;
using comfy::format_byte_size_exact;
using comfy::parse_byte_size;

namespace {
constexpr std::uint64_t kKiB = std::uint64_t{1} << 10;
constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
constexpr std::uint64_t kTiB = std::uint64_t{1} << 40;
constexpr std::uint64_t kPiB = std::uint64_t{1} << 50;
}  // namespace

TEST_CASE("a byte size takes each binary unit, with or without one space") {
    const auto [text, bytes] = GENERATE(table<std::string, std::uint64_t>({
        {"0B", 0},
        {"100B", 100},
        {"100 B", 100},
        {"3KiB", 3 * kKiB},
        {"512MiB", 512 * kMiB},
        {"512 MiB", 512 * kMiB},
        {"24GiB", 24 * kGiB},
        {"24 GiB", 24 * kGiB},
        {"2TiB", 2 * kTiB},
        {"1PiB", kPiB},
        {"1 PiB", kPiB},
        {"16383PiB", 16383 * kPiB},
        {"18446744073709551615B", UINT64_MAX},
    }));
    INFO("text: " << text);
    const auto parsed = parse_byte_size(text);
    REQUIRE(parsed);
    CHECK(*parsed == bytes);
}

TEST_CASE("a byte size too large for 64 bits saturates instead of wrapping") {
    const auto text = GENERATE(as<std::string>{}, "16384PiB", "17179869184TiB", "99999999999999999999GiB",
                               "18446744073709551616B", "99999999999999999999999999 B");
    INFO("text: " << text);
    const auto parsed = parse_byte_size(text);
    REQUIRE(parsed);
    CHECK(*parsed == UINT64_MAX);
}

TEST_CASE("anything else is not a byte size") {
    const auto text = GENERATE(as<std::string>{}, "", "GiB", " 1GiB", "1  GiB", "1GiB ", "1\tGiB", "-1GiB", "+1GiB",
                               "1.5GiB", "1e3B", "0x10B", "24GB", "24 GB", "24G", "24gib", "24GIB", "24EiB", "1024",
                               "1 024MiB", "1GiBB", "1 ");
    INFO("text: \"" << text << "\"");
    CHECK_FALSE(parse_byte_size(text));
}

TEST_CASE("a byte size is shown in the largest unit that keeps the number at least 1") {
    const auto [bytes, text] = GENERATE(table<std::uint64_t, std::string>({
        {0, "0 B"},
        {1023, "1023 B"},
        {kKiB, "1.0 KiB"},
        {512 * kKiB, "512 KiB"},
        {3 * kGiB / 2, "1.5 GiB"},
        {24 * kGiB, "24 GiB"},
        {1023 * kTiB, "1023 TiB"},
        {kPiB, "1.0 PiB"},
        {UINT64_MAX, "16384 PiB"},
    }));
    CHECK(format_byte_size(bytes) == text);
}

TEST_CASE("a byte size is written exactly in the largest unit that divides it") {
    const auto [bytes, text] = GENERATE(table<std::uint64_t, std::string>({
        {0, "0B"},
        {1, "1B"},
        {1000, "1000B"},
        {kKiB, "1KiB"},
        {256 * kMiB, "256MiB"},
        {kMiB + kKiB, "1025KiB"},
        {24 * kGiB, "24GiB"},
        {1025 * kTiB, "1025TiB"},
        {kPiB, "1PiB"},
        {UINT64_MAX, "18446744073709551615B"},
    }));
    CHECK(format_byte_size_exact(bytes) == text);
    // What it writes reads back as the same size.
    CHECK(parse_byte_size(text) == bytes);
}
