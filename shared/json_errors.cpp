#include "shared/json_errors.hpp"

#include <cerrno>
#include <cstdio>
#include <memory>
#include <system_error>

namespace comfy {

namespace {

using json = nlohmann::json;

constexpr std::size_t kMaxShownValueLength = 60;

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

struct CloseFile {
    void operator()(std::FILE* file) const { std::fclose(file); }
};

// fopen and fread rather than a stream, so that the reason (a directory, no permission)
// is errno's, not a stream's failbit.
std::string read_text(const std::string& path) {
    const auto cannot_read = [&path](int error) {
        return JsonFileError(json_file_message(path, "cannot read: " + system_message(error)));
    };
    const std::unique_ptr<std::FILE, CloseFile> in(std::fopen(path.c_str(), "rb"));
    if (!in) throw cannot_read(errno);
    std::string text;
    char buffer[16384];
    while (const std::size_t count = std::fread(buffer, 1, sizeof buffer, in.get())) text.append(buffer, count);
    if (std::ferror(in.get())) throw cannot_read(errno);
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
    return pointer.empty() ? "/" : std::string(pointer);
}

std::string describe_json_value(const json& value) {
    std::string text = value.dump(-1, ' ', /*ensure_ascii=*/true);
    if (text.size() > kMaxShownValueLength) text = text.substr(0, kMaxShownValueLength - 3) + "...";
    return text;
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

json read_json_file(const std::string& path, const json::parser_callback_t& callback) {
    const std::string text = read_text(path);
    try {
        return json::parse(text, callback);
    } catch (const json::parse_error& error) {
        throw JsonFileError(json_file_message(path, "not valid JSON: " + without_exception_id(error.what())));
    }
}

}  // namespace comfy
