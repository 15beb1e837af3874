#pragma once
// One-line messages about JSON files (configs, workloads, pack descriptions), all in one
// shape: "<file>: at <JSON path>: expected <what>, found <what was there>", or for the
// file as a whole "<file>: cannot read: <reason>" and "<file>: not valid JSON: <where>".
// One line each: control characters in a file name, key or system message are shown as
// \xHH, and a value is shown ASCII-only and cut short.

#include <nlohmann/json.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace comfy {

// What read_json_file throws; the message is one line and starts with the file name.
class JsonFileError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// "found nothing": the key was not there.
inline constexpr std::string_view kFoundNothing = "nothing";

// A JSON pointer as text for a message: the document itself (the empty pointer) is "/".
std::string json_path_text(std::string_view pointer);

// A value as written, ASCII-only, cut to 60 characters (ending in "..."). Only what is
// shown is visited, so a huge or deeply nested value costs no more than a small one.
std::string describe_json_value(const nlohmann::json& value);
std::string describe_json_value(const nlohmann::ordered_json& value);
std::string describe_json_value(const std::string& text);  // a string value or a key

// "<file>: <problem>", made one line.
std::string json_file_message(std::string_view file, std::string_view problem);

// "<file>: at <path>: expected <expected>, found <found>", made one line. `path` is a
// JSON pointer as text; `found` is prose, such as kFoundNothing or "an unknown key".
std::string json_error_message(std::string_view file, std::string_view path, std::string_view expected,
                               std::string_view found);

// The same with the value that was found, shown by describe_json_value.
std::string json_value_error_message(std::string_view file, std::string_view path, std::string_view expected,
                                     const nlohmann::json& found);

// The deepest arrays and objects may nest in a file the loaders take. Every format here
// nests a few levels; the limit keeps whatever walks a value recursively (dump, copy,
// compare) far from the end of the stack.
inline constexpr std::size_t kMaxJsonDepth = 64;

// Why a text is not JSON the loaders take. Either it is not JSON (syntax() is true; the
// message is "not valid JSON: <nlohmann's message without its exception id, naming the
// line and column>"), or it passes a limit: nesting deeper than kMaxJsonDepth, or a number
// no double holds (1E400), refused with "at line L, column C: expected ..., found ...".
class JsonTextError : public std::runtime_error {
public:
    JsonTextError(const std::string& message, bool syntax, std::size_t byte, std::string detail)
        : std::runtime_error(message), syntax_(syntax), byte_(byte), detail_(std::move(detail)) {}

    bool syntax() const noexcept { return syntax_; }
    // Where, counted in bytes from 1 (0 when the parser did not say).
    std::size_t byte() const noexcept { return byte_; }
    // Without the place: nlohmann's description, or "expected ..., found ...".
    const std::string& detail() const noexcept { return detail_; }

private:
    bool syntax_;
    std::size_t byte_;
    std::string detail_;
};

// json::parse (or ordered_json::parse) of `text` within the limits above; throws
// JsonTextError. Defined for nlohmann::json and nlohmann::ordered_json. There is no parser
// callback: nlohmann's callback parser scans the enclosing array at the end of every
// object, quadratic time on an array of objects; a SAX pass over the text
// (json::sax_parse) follows a parse in linear time instead.
template <typename Json>
Json parse_json(std::string_view text);

// Reads (a regular file of at most kMaxJsonFileBytes) and parses a whole file. Throws
// JsonFileError: "<file>: cannot read: <reason>", or "<file>: " and the message of
// parse_json's JsonTextError.
nlohmann::json read_json_file(const std::string& path);

// The parsing half of read_json_file, for text already read from `path`.
nlohmann::json parse_json_file_text(std::string_view text, const std::string& path);

// errno's text for `error`, such as "Permission denied", for "cannot read: ..." and the like.
std::string system_message(int error);

// Non-negative whole numbers only: 5000.0 and 5e3 are not, so a fraction never gets
// rounded away without a word. For nlohmann::json and nlohmann::ordered_json alike.
template <typename Json>
std::optional<std::uint64_t> as_unsigned(const Json& value) {
    if (value.is_number_unsigned()) return value.template get<std::uint64_t>();
    if (value.is_number_integer() && value.template get<std::int64_t>() >= 0) {
        return static_cast<std::uint64_t>(value.template get<std::int64_t>());  // "-0" is parsed as signed
    }
    return std::nullopt;
}

// The names a value may take, for an "expected" in a message: "a", "b" or "c".
std::string quoted_names(std::span<const std::string_view> names);

// The names of a {name, value} table, in its order.
template <typename Value, std::size_t N>
constexpr std::array<std::string_view, N> choice_names(const std::pair<std::string_view, Value> (&choices)[N]) {
    std::array<std::string_view, N> names{};
    for (std::size_t i = 0; i < N; ++i) names[i] = choices[i].first;
    return names;
}

}  // namespace comfy
