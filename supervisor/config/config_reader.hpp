#pragma once
// How every section of a config file is read: a value travels as a Node with its JSON
// pointer, and every check fails through ConfigReader::fail, so that each problem in the
// file, whichever section finds it, is told in one shape: "<file>: at <path>: expected
// <what>, found <what was there>". Private to supervisor/config/.

#include "shared/json_errors.hpp"
#include "supervisor/config/config.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace comfy::supervisor::config_loader {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Pointer = json::json_pointer;

// Inclusive bounds of a whole-number setting.
struct Range {
    std::uint64_t min;
    std::uint64_t max;
};

// A JSON value together with its path in the file, so that any message can say where.
struct Node {
    const json& value;
    Pointer at;
};

std::optional<Node> member(const Node& object, const std::string& key);

// A pointer as a message shows it ("/" for the whole document).
std::string path_text(const Pointer& at);

// The config's text as JSON, a key repeated in an object refused. Throws ConfigError.
json parse_document(std::string_view text, const std::string& file);

// Empty when `file` can be started by this process; otherwise why not.
std::string executable_problem(const fs::path& file);
// Empty when `folder` is a directory; otherwise why not.
std::string directory_problem(const fs::path& folder);
// Whether `path` is `folder` or lies inside it, part by part (both absolute and normal).
bool is_within(const fs::path& path, const fs::path& folder);

// Reads the values of one config file, failing with ConfigError on the first wrong one.
class ConfigReader {
public:
    // Relative paths in the file mean the same whichever directory the supervisor is
    // started from: they are taken from the config's own folder.
    explicit ConfigReader(std::string file);

    [[noreturn]] void fail(const Pointer& at, std::string_view expected, std::string_view found) const;

    Node required(const Node& object, const std::string& key, std::string_view what) const;
    void require_object(const Node& node) const;
    // Unknown keys are errors: a misspelt optional key would otherwise be a silent default.
    void expect_object(const Node& node, std::initializer_list<std::string_view> keys, std::string_view note = {}) const;

    std::uint64_t read_unsigned(const Node& node, Range range, std::string_view unit = {}) const;
    Milliseconds read_ms(const Node& node, Range range) const;
    std::uint64_t read_size(const Node& node, Range range) const;
    bool read_flag(const Node& node) const;

    template <typename Enum, std::size_t N>
    Enum read_choice(const Node& node, const std::pair<std::string_view, Enum> (&choices)[N]) const {
        if (node.value.is_string()) {
            for (const auto& [name, choice] : choices) {
                if (node.value.get_ref<const std::string&>() == name) return choice;
            }
        }
        fail(node.at, quoted_names(choice_names(choices)), describe_json_value(node.value));
    }

    // Strings end up in execve(), where a NUL would cut them short.
    std::string read_string(const Node& node, std::string_view what) const;
    // A list of strings, such as a command's arguments.
    std::vector<std::string> read_args(const Node& node) const;
    // Relative to the config's folder, normalized but with symbolic links kept: a virtual
    // environment's python finds its pyvenv.cfg through the link it was started by.
    fs::path read_path(const Node& node, std::string_view what) const;
    std::string read_command(const Node& node) const;
    std::string read_directory(const Node& node) const;

    // The config file as it was named, for messages.
    const std::string& file() const { return file_; }
    // The config's folder, absolute: where relative paths start.
    const fs::path& folder() const { return folder_; }

private:
    std::string file_;
    fs::path folder_;
};

}  // namespace comfy::supervisor::config_loader
