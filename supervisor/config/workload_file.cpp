#include "supervisor/config/workload_file.hpp"

#include "shared/input_file.hpp"
#include "shared/json_errors.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace comfy::supervisor {

namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& file, const std::string& path, const std::string& expected,
                       const json& found) {
    throw ConfigError(json_value_error_message(file, path, expected, found));
}

}  // namespace

Workload load_workload(const std::string& path, const Config& config) {
    std::string text;
    try {
        text = read_input_file(path, kMaxJsonFileBytes);
    } catch (const InputFileError& error) {
        throw ConfigError(error.what());
    }
    return load_workload_text(text, path, config);
}

Workload load_workload_text(std::string_view text, const std::string& path, const Config& config) {
    json document;
    try {
        document = parse_json_file_text(text, path);
    } catch (const JsonFileError& error) {
        throw ConfigError(error.what());
    }
    if (!document.is_object()) fail(path, "/", "an object with \"prompts\"", document);
    Workload workload;
    for (const auto& [key, value] : document.items()) {
        if (key == "repeat") {
            if (!value.is_number_unsigned() || value.get<std::uint64_t>() < 1 || value.get<std::uint64_t>() > 100000) {
                fail(path, "/repeat", "a whole number from 1 to 100000", value);
            }
            workload.repeat = value.get<std::uint32_t>();
        } else if (key == "parallel") {
            if (!value.is_boolean()) fail(path, "/parallel", "true or false", value);
            workload.parallel = value.get<bool>();
        } else if (key != "prompts") {
            fail(path, "/" + key, "one of prompts, repeat, parallel", json(key));
        }
    }
    constexpr const char* kPromptsExpected = "a non-empty array of prompts";
    if (!document.contains("prompts")) {
        throw ConfigError(json_error_message(path, "/prompts", kPromptsExpected, kFoundNothing));
    }
    const json& prompts = document.at("prompts");
    if (!prompts.is_array() || prompts.empty()) fail(path, "/prompts", kPromptsExpected, prompts);
    for (std::size_t p = 0; p < prompts.size(); ++p) {
        const std::string prompt_path = "/prompts/" + std::to_string(p);
        if (!prompts[p].is_array() || prompts[p].empty()) fail(path, prompt_path, "a non-empty array of nodes", prompts[p]);
        auto& nodes = workload.prompts.emplace_back();
        for (std::size_t n = 0; n < prompts[p].size(); ++n) {
            const std::string node_path = prompt_path + "/" + std::to_string(n);
            const json& node = prompts[p][n];
            if (!node.is_object() || node.size() != 2 || !node.contains("pack") || !node.contains("node") ||
                !node["pack"].is_string() || !node["node"].is_string()) {
                fail(path, node_path, "{\"pack\": NAME, \"node\": NAME}", node);
            }
            const auto pack = node["pack"].get<std::string>();
            const bool known = std::any_of(config.packs.begin(), config.packs.end(),
                                           [&](const PackConfig& c) { return c.name == pack; });
            if (!known) fail(path, node_path + "/pack", "a pack named in " + config.source, node["pack"]);
            nodes.push_back({pack, node["node"].get<std::string>()});
        }
    }
    return workload;
}

}  // namespace comfy::supervisor
