#pragma once
// A name in a fixed-size field that travels between processes: a node's name in
// work_request, a model's in model_registered and in the ledger. Printable ASCII, ended
// by a NUL, zero after it, so that every reader can print it on a terminal and put it
// into JSON (which needs UTF-8) as it is. A writer makes such a field out of any text
// (set_name: cut, and '?' for every other byte); a reader refuses a field no writer
// makes (is_valid_name), since it is another process's bytes.

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace comfy {

// A model's name: the ComfyUI class of the model and the file it came from, or a
// reference worker's pack-file name (docs/ARCHITECTURE.md, "The ledger").
inline constexpr std::size_t kModelNameBytes = 64;

constexpr bool is_printable_ascii(char c) noexcept { return c >= 0x20 && c < 0x7f; }

// NUL-terminated, printable before the NUL, zero after it. An empty name is valid: the
// caller says whether it may be empty.
template <std::size_t N>
constexpr bool is_valid_name(const char (&field)[N]) noexcept {
    const char* end = std::find(field, field + N, '\0');
    return end != field + N && std::all_of(field, end, is_printable_ascii) &&
           std::all_of(end, field + N, [](char c) { return c == '\0'; });
}

// `text` into `field`: its first N - 1 bytes, each one outside printable ASCII as '?', the
// rest of the field zero.
template <std::size_t N>
constexpr void set_name(char (&field)[N], std::string_view text) noexcept {
    const std::size_t length = std::min(text.size(), N - 1);
    for (std::size_t i = 0; i < N; ++i) {
        field[i] = i >= length ? '\0' : is_printable_ascii(text[i]) ? text[i] : '?';
    }
}

// The name up to its NUL (the whole field when it has none: a reader validates first).
template <std::size_t N>
constexpr std::string_view name_in(const char (&field)[N]) noexcept {
    return std::string_view(field, static_cast<std::size_t>(std::find(field, field + N, '\0') - field));
}

}  // namespace comfy
