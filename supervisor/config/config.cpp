// Loads a config file: reads and parses it, then has each section read in the file's
// order (sections.hpp), handing a later section what it needs of an earlier one: the
// capacities under /limits, whether there is a ComfyUI host, and its checkout. Every
// problem is reported through one ConfigReader (config_reader.hpp).

#include "supervisor/config/config.hpp"

#include "shared/input_file.hpp"
#include "supervisor/config/sections.hpp"

#include <algorithm>
#include <cstdlib>

namespace comfy::supervisor {

Config load_config(const std::string& path) {
    std::string text;
    try {
        text = read_input_file(path, kMaxJsonFileBytes);
    } catch (const InputFileError& error) {
        throw ConfigError(error.what());
    }
    return load_config_text(text, path);
}

Config load_config_text(std::string_view text, const std::string& path) {
    using namespace config_loader;
    const json document = parse_document(text, path);
    const ConfigReader reader(path);
    const Node root{document, Pointer{}};
    reader.expect_object(root, {"device", "limits", "memory", "host", "http", "comfyui", "packs", "environments"});
    Config config;
    config.source = path;
    if (const auto device = member(root, "device")) config.device = read_device(reader, *device);
    if (const auto limits = member(root, "limits")) config.limits = read_limits(reader, *limits);
    if (const auto memory = member(root, "memory")) {
        config.memory = read_memory(reader, *memory, config.limits.capacities);
    }
    if (const auto host = member(root, "host")) config.host = read_host(reader, *host);
    if (const auto http = member(root, "http")) config.http = read_http(reader, *http);
    if (const auto comfyui = member(root, "comfyui")) {
        config.comfyui = read_comfyui(reader, *comfyui);
        if (const auto checkout = member(*comfyui, "checkout")) config.comfyui_checkout = reader.read_directory(*checkout);
    }
    if (const auto environments = member(root, "environments")) {
        config.environments = read_environments(reader, *environments);
    }
    config.packs = read_packs(reader, reader.required(root, "packs", "a list of packs"),
                              config.limits.capacities.participants, config.comfyui.has_value(),
                              config.comfyui_checkout);
    return config;
}

std::map<std::string, std::string> configured_environment(const PackConfig& process) {
    std::map<std::string, std::string> env;
    for (const auto& name : process.env_allowlist) {
        if (const char* value = std::getenv(name.c_str())) env[name] = value;
    }
    for (const auto& [key, value] : process.env) env[key] = value;
    return env;
}

std::uint32_t ledger_quota_of(const Config& config) {
    if (config.memory.ledger_quota) return *config.memory.ledger_quota;
    const std::size_t participants = config.packs.size() + (config.comfyui ? 1 : 0);
    const std::size_t share = config.limits.capacities.ledger_entries / std::max<std::size_t>(participants, 1);
    return static_cast<std::uint32_t>(std::max<std::size_t>(share, 1));
}

}  // namespace comfy::supervisor
