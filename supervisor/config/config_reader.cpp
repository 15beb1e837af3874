// The reading that every section of a config file shares: parsing the text, finding a
// member with its JSON pointer, and the checks of a number, size, flag, string or path,
// each failing in the one shape that config_reader.hpp describes.

#include "supervisor/config/config_reader.hpp"

#include "shared/byte_size.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <system_error>

namespace comfy::supervisor::config_loader {

namespace {

[[noreturn]] void fail_in(const std::string& file, const Pointer& at, std::string_view expected, std::string_view found) {
    throw ConfigError(json_error_message(file, at.to_string(), expected, found));
}

std::string join(std::initializer_list<std::string_view> words, std::string_view separator) {
    std::string joined;
    for (const auto word : words) {
        if (!joined.empty()) joined += separator;
        joined += word;
    }
    return joined;
}

// nlohmann::json keeps the last of two equal keys in an object without a word, which in a
// config silently drops settings; a second pass over the text as SAX events finds the
// first repeated key. (Not a parser callback: nlohmann's callback parser scans the whole
// enclosing array at the end of every object, so an array of a million objects took hours.)
class RepeatedKeyFinder : public nlohmann::json_sax<json> {
public:
    bool null() override { return finish_element(); }
    bool boolean(bool) override { return finish_element(); }
    bool number_integer(json::number_integer_t) override { return finish_element(); }
    bool number_unsigned(json::number_unsigned_t) override { return finish_element(); }
    bool number_float(json::number_float_t, const json::string_t&) override { return finish_element(); }
    bool string(json::string_t&) override { return finish_element(); }
    bool binary(json::binary_t&) override { return finish_element(); }
    bool start_object(std::size_t) override { return open(/*array=*/false); }
    bool start_array(std::size_t) override { return open(/*array=*/true); }
    bool end_object() override { return close(); }
    bool end_array() override { return close(); }
    bool key(json::string_t& key) override {
        see_key(key);
        return true;
    }
    // The text was parsed before, so this does not happen; stop if it does.
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

    const std::optional<Pointer>& repeated() const { return repeated_; }

private:
    // An object or array the parser is inside of.
    struct Open {
        explicit Open(bool array) : is_array(array) {}
        bool is_array;
        std::size_t index = 0;       // arrays: the element being parsed
        std::string key;             // objects: the member being parsed
        std::set<std::string> keys;  // objects: every key so far
    };

    void see_key(const std::string& key) {
        Open& object = open_.back();
        object.key = key;
        if (!object.keys.insert(object.key).second && !repeated_) repeated_ = path_here();
    }

    bool open(bool array) {
        open_.emplace_back(array);
        return true;
    }

    bool close() {
        open_.pop_back();
        return finish_element();
    }

    bool finish_element() {
        if (!open_.empty() && open_.back().is_array) ++open_.back().index;
        return true;
    }

    Pointer path_here() const {
        Pointer path;
        for (const Open& open : open_) path = open.is_array ? path / open.index : path / open.key;
        return path;
    }

    std::vector<Open> open_;
    std::optional<Pointer> repeated_;
};

}  // namespace

std::optional<Node> member(const Node& object, const std::string& key) {
    const auto found = object.value.find(key);
    if (found == object.value.end()) return std::nullopt;
    return Node{*found, object.at / key};
}

std::string path_text(const Pointer& at) {
    return json_path_text(at.to_string());
}

json parse_document(std::string_view text, const std::string& file) {
    json document;
    try {
        document = parse_json_file_text(text, file);
    } catch (const JsonFileError& error) {
        throw ConfigError(error.what());
    }
    RepeatedKeyFinder finder;
    json::sax_parse(text, &finder);
    if (finder.repeated()) fail_in(file, *finder.repeated(), "each key once in its object", "this key a second time");
    return document;
}

std::string executable_problem(const fs::path& file) {
    std::error_code error;
    const auto status = fs::status(file, error);
    if (error) return error.message();
    if (!fs::is_regular_file(status)) return "not a regular file";
    if (::access(file.c_str(), X_OK) != 0) return system_message(errno);
    return {};
}

std::string directory_problem(const fs::path& folder) {
    std::error_code error;
    const auto status = fs::status(folder, error);
    if (error) return error.message();
    if (!fs::is_directory(status)) return "not a directory";
    return {};
}

bool is_within(const fs::path& path, const fs::path& folder) {
    return std::mismatch(folder.begin(), folder.end(), path.begin(), path.end()).first == folder.end();
}

ConfigReader::ConfigReader(std::string file)
    : file_(std::move(file)), folder_(fs::absolute(file_).parent_path().lexically_normal()) {}

void ConfigReader::fail(const Pointer& at, std::string_view expected, std::string_view found) const {
    fail_in(file_, at, expected, found);
}

Node ConfigReader::required(const Node& object, const std::string& key, std::string_view what) const {
    if (auto found = member(object, key)) return std::move(*found);
    fail(object.at / key, std::string(what) + " (required)", kFoundNothing);
}

void ConfigReader::require_object(const Node& node) const {
    if (!node.value.is_object()) fail(node.at, "an object", describe_json_value(node.value));
}

void ConfigReader::expect_object(const Node& node, std::initializer_list<std::string_view> keys,
                                 std::string_view note) const {
    require_object(node);
    for (const auto& item : node.value.items()) {
        if (std::find(keys.begin(), keys.end(), item.key()) == keys.end()) {
            fail(node.at / item.key(), "one of the keys " + join(keys, ", ") + std::string(note), "an unknown key");
        }
    }
}

std::uint64_t ConfigReader::read_unsigned(const Node& node, Range range, std::string_view unit) const {
    const auto number = as_unsigned(node.value);
    if (number && *number >= range.min && *number <= range.max) return *number;
    fail(node.at,
         "a whole number" + std::string(unit) + " from " + std::to_string(range.min) + " to " + std::to_string(range.max),
         describe_json_value(node.value));
}

Milliseconds ConfigReader::read_ms(const Node& node, Range range) const {
    return Milliseconds{static_cast<Milliseconds::rep>(read_unsigned(node, range, " of milliseconds"))};
}

std::uint64_t ConfigReader::read_size(const Node& node, Range range) const {
    auto bytes = as_unsigned(node.value);
    if (node.value.is_string()) bytes = parse_byte_size(node.value.get_ref<const std::string&>());
    if (bytes && *bytes >= range.min && *bytes <= range.max) return *bytes;
    fail(node.at,
         "a size from " + format_byte_size_exact(range.min) + " to " + format_byte_size_exact(range.max) +
             ": a whole number of bytes or a string like \"24GiB\" (units B, KiB, MiB, GiB, TiB, PiB)",
         describe_json_value(node.value));
}

bool ConfigReader::read_flag(const Node& node) const {
    if (!node.value.is_boolean()) fail(node.at, "true or false", describe_json_value(node.value));
    return node.value.get<bool>();
}

std::string ConfigReader::read_string(const Node& node, std::string_view what) const {
    if (!node.value.is_string()) fail(node.at, what, describe_json_value(node.value));
    const auto& text = node.value.get_ref<const std::string&>();
    if (text.find('\0') != std::string::npos) {
        fail(node.at, std::string(what) + " without NUL characters", describe_json_value(node.value));
    }
    return text;
}

std::vector<std::string> ConfigReader::read_args(const Node& node) const {
    if (!node.value.is_array()) fail(node.at, "a list of strings", describe_json_value(node.value));
    std::vector<std::string> args;
    for (std::size_t index = 0; index < node.value.size(); ++index) {
        args.push_back(read_string(Node{node.value[index], node.at / index}, "a string"));
    }
    return args;
}

fs::path ConfigReader::read_path(const Node& node, std::string_view what) const {
    const std::string text = read_string(node, what);
    if (text.empty()) fail(node.at, what, describe_json_value(node.value));
    fs::path path = (folder_ / text).lexically_normal();
    if (!path.has_filename()) path = path.parent_path();  // "dir/" is "dir"
    return path;
}

std::string ConfigReader::read_command(const Node& node) const {
    const fs::path file = read_path(node, "the path of an executable file");
    if (const auto problem = executable_problem(file); !problem.empty()) {
        fail(node.at, "an executable file", describe_json_value(node.value) + " (" + file.string() + ": " + problem + ")");
    }
    return file.string();
}

std::string ConfigReader::read_directory(const Node& node) const {
    const fs::path folder = read_path(node, "the path of a directory");
    if (const auto problem = directory_problem(folder); !problem.empty()) {
        fail(node.at, "a directory", describe_json_value(node.value) + " (" + folder.string() + ": " + problem + ")");
    }
    return folder.string();
}

}  // namespace comfy::supervisor::config_loader
