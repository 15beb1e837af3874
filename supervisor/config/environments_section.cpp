// Reads /environments: where `comfyctl pack add` builds the packs' environments and where it
// finds their packages (a wheelhouse, an index). The supervisor itself uses none of it; the
// pack tool reads the same keys from the same file (docs/ENVIRONMENTS.md). They are read
// here all the same, so that a misspelt key or a wrong value is told by the supervisor's and
// `comfy-supervisor check`'s one line, as anywhere else in the file, and not only by the tool.

#include "supervisor/config/sections.hpp"

namespace comfy::supervisor::config_loader {

namespace {

bool is_url(std::string_view text) {
    for (const std::string_view scheme : {"http://", "https://", "file://"}) {
        if (text.starts_with(scheme) && text.size() > scheme.size()) return true;
    }
    return false;
}

}  // namespace

EnvironmentsConfig read_environments(const ConfigReader& reader, const Node& node) {
    reader.expect_object(node, {"root", "find_links", "no_index", "index_url"});
    EnvironmentsConfig environments;
    if (const auto root = member(node, "root")) {
        environments.root = reader.read_path(*root, "the folder the packs' environments are built in").string();
    }
    if (const auto links = member(node, "find_links")) {
        // Folders only: the tool takes them from the config's folder as the supervisor does.
        if (!links->value.is_array()) reader.fail(links->at, "a list of folders", describe_json_value(links->value));
        for (std::size_t index = 0; index < links->value.size(); ++index) {
            const Node link{links->value[index], links->at / index};
            environments.find_links.push_back(reader.read_path(link, "a folder of wheels").string());
        }
    }
    if (const auto no_index = member(node, "no_index")) environments.no_index = reader.read_flag(*no_index);
    if (const auto index = member(node, "index_url")) {
        constexpr const char* kRule = "a package index's http://, https:// or file:// URL, as pip's --index-url";
        environments.index_url = reader.read_string(*index, kRule);
        if (!is_url(environments.index_url)) reader.fail(index->at, kRule, describe_json_value(index->value));
        if (environments.no_index) {
            reader.fail(index->at, "no index_url beside \"no_index\": true (pip would use neither)",
                        describe_json_value(index->value));
        }
    }
    return environments;
}

}  // namespace comfy::supervisor::config_loader
