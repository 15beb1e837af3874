#pragma once
// The message every round-trip measurement carries: 64 bytes, one cache line, with a
// sequence number the echo side checks so a lost or reordered message cannot go unnoticed.

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace comfy::bench {

struct Message64 {
    std::uint64_t sequence = 0;
    std::array<std::byte, 56> payload{};
};
static_assert(sizeof(Message64) == 64, "the benchmark measures 64-byte messages");
static_assert(std::is_trivially_copyable_v<Message64>, "the ring copies messages as bytes");

}  // namespace comfy::bench
