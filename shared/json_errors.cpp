#include "shared/json_errors.hpp"

#include "shared/input_file.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <system_error>

namespace comfy {

namespace {

using json = nlohmann::json;

constexpr std::size_t kMaxShownValueLength = 60;
// A JSON path names keys as written; a key of megabytes is cut rather than printed.
constexpr std::size_t kMaxShownPathLength = 200;

// File names, keys and system messages may hold control characters; shown as \xHH they
// cannot break the promise of one line per error.
std::string single_line(std::string_view text) {
    std::string line;
    line.reserve(text.size());
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte >= 0x20 && byte != 0x7f) {
            line += c;
            continue;
        }
        char escaped[5];
        std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
        line += escaped;
    }
    return line;
}

// nlohmann's messages start with an id like "[json.exception.parse_error.101] ", which
// tells an operator nothing; the rest names the line and column.
std::string without_exception_id(std::string_view message) {
    const auto id_end = message.find("] ");
    if (!message.starts_with('[') || id_end == std::string_view::npos) return std::string(message);
    return std::string(message.substr(id_end + 2));
}

// The first place where `text` passes a limit, as the error to throw; nothing when none.
// Follows the lexer only as far as the limits need: strings are skipped (their brackets do
// not nest), and a number is a run of the characters numbers are made of. Sound for
// valid JSON, and for the valid part of a text before its first syntax error, which is as
// far as the parser goes.
std::optional<JsonTextError> limit_problem(std::string_view text) {
    std::size_t depth = 0;
    std::size_t line = 1;
    std::size_t line_start = 0;
    const auto problem = [&](std::size_t at, const std::string& expected, std::string_view found) {
        const std::string detail = "expected " + expected + ", found " + std::string(found);
        return JsonTextError("at line " + std::to_string(line) + ", column " + std::to_string(at - line_start + 1) +
                                 ": " + detail,
                             /*syntax=*/false, at + 1, detail);
    };
    const auto in_number = [](char c) {
        return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
    };
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '"') {
            for (++i; i < text.size() && text[i] != '"'; ++i) {
                if (text[i] == '\\') ++i;
            }
        } else if (c == '[' || c == '{') {
            if (++depth > kMaxJsonDepth) {
                return problem(i, "arrays and objects nested at most " + std::to_string(kMaxJsonDepth) + " deep",
                               "one nested deeper");
            }
        } else if (c == ']' || c == '}') {
            if (depth > 0) --depth;
        } else if (c == '\n') {
            ++line;
            line_start = i + 1;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            std::size_t end = i;
            while (end < text.size() && in_number(text[end])) ++end;
            const std::string_view number = text.substr(i, end - i);
            // Without an exponent a double overflows only past 309 digits; strtod (as the
            // parser's own) decides the rest. An underflow such as 1E-400 reads as 0 there too.
            const bool may_overflow = number.find_first_of("eE") != std::string_view::npos || number.size() > 300;
            if (may_overflow && !std::isfinite(std::strtod(std::string(number).c_str(), nullptr))) {
                // Digits, signs, points and exponents only: shown as written, cut short.
                const std::string shown = number.size() > kMaxShownValueLength
                                              ? std::string(number.substr(0, kMaxShownValueLength - 3)) + "..."
                                              : std::string(number);
                return problem(i, "a number a double holds (at most about 1.8E308)", shown);
            }
            i = end - 1;
        }
    }
    return std::nullopt;
}

// Appends `value` as json::dump writes it (compact, ASCII-only), stopping soon after the
// text passes what will be shown: each level adds a bracket, so however deep the value,
// the recursion ends within kMaxShownValueLength calls.
void show_string(const std::string& text, std::string& shown) {
    // A cut may split a UTF-8 sequence: replaced, and past what is shown anyway.
    shown += nlohmann::json(text.substr(0, kMaxShownValueLength + 1))
                 .dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
}

template <typename Json>
void show(const Json& value, std::string& shown) {
    if (shown.size() > kMaxShownValueLength) return;
    if (value.is_object() || value.is_array()) {
        shown += value.is_object() ? '{' : '[';
        const char* separator = "";
        for (auto item = value.begin(); item != value.end() && shown.size() <= kMaxShownValueLength; ++item) {
            shown += separator;
            separator = ",";
            if (value.is_object()) {
                show_string(item.key(), shown);
                shown += ':';
            }
            show(item.value(), shown);
        }
        shown += value.is_object() ? '}' : ']';
    } else if (value.is_string()) {
        show_string(value.template get_ref<const std::string&>(), shown);
    } else {
        shown += value.dump(-1, ' ', /*ensure_ascii=*/true);  // a number, true, false or null
    }
}

template <typename Json>
std::string describe(const Json& value) {
    std::string text;
    show(value, text);
    if (text.size() > kMaxShownValueLength) text = text.substr(0, kMaxShownValueLength - 3) + "...";
    return text;
}

}  // namespace

std::string system_message(int error) {
    return std::error_code(error, std::generic_category()).message();
}

std::string quoted_names(std::span<const std::string_view> names) {
    std::string text;
    for (std::size_t i = 0; i < names.size(); ++i) {
        if (i > 0) text += i + 1 == names.size() ? " or " : ", ";
        text += '"' + std::string(names[i]) + '"';
    }
    return text;
}

std::string json_path_text(std::string_view pointer) {
    if (pointer.empty()) return "/";
    if (pointer.size() > kMaxShownPathLength) return std::string(pointer.substr(0, kMaxShownPathLength - 3)) + "...";
    return std::string(pointer);
}

std::string describe_json_value(const json& value) {
    return describe(value);
}

std::string describe_json_value(const nlohmann::ordered_json& value) {
    return describe(value);
}

std::string describe_json_value(const std::string& text) {
    std::string shown;
    show_string(text, shown);
    if (shown.size() > kMaxShownValueLength) shown = shown.substr(0, kMaxShownValueLength - 3) + "...";
    return shown;
}

std::string json_file_message(std::string_view file, std::string_view problem) {
    std::string message(file);
    message += ": ";
    message += problem;
    return single_line(message);
}

std::string json_error_message(std::string_view file, std::string_view path, std::string_view expected,
                               std::string_view found) {
    return json_file_message(file, "at " + json_path_text(path) + ": expected " + std::string(expected) + ", found " +
                                       std::string(found));
}

std::string json_value_error_message(std::string_view file, std::string_view path, std::string_view expected,
                                     const json& found) {
    return json_error_message(file, path, expected, describe_json_value(found));
}

template <typename Json>
Json parse_json(std::string_view text) {
    if (auto problem = limit_problem(text)) throw std::move(*problem);
    try {
        return Json::parse(text);
    } catch (const nlohmann::json::parse_error& error) {
        const std::string detail = without_exception_id(error.what());
        throw JsonTextError("not valid JSON: " + detail, /*syntax=*/true, error.byte, detail);
    } catch (const nlohmann::json::exception& error) {
        // What else the parser may refuse (the limits above leave nothing known): said as
        // nlohmann says it, never let out as a library exception.
        const std::string detail = without_exception_id(error.what());
        throw JsonTextError("not valid JSON: " + detail, /*syntax=*/true, 0, detail);
    }
}

template json parse_json<json>(std::string_view);
template nlohmann::ordered_json parse_json<nlohmann::ordered_json>(std::string_view);

json parse_json_file_text(std::string_view text, const std::string& path) {
    try {
        return parse_json<json>(text);
    } catch (const JsonTextError& error) {
        throw JsonFileError(json_file_message(path, error.what()));
    }
}

json read_json_file(const std::string& path) {
    std::string text;
    try {
        text = read_input_file(path, kMaxJsonFileBytes);
    } catch (const InputFileError& error) {
        throw JsonFileError(error.what());
    }
    return parse_json_file_text(text, path);
}

}  // namespace comfy
