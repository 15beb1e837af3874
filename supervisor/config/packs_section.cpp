// Reads /packs: the list of node packs to run, each named (a name unique among them and
// short enough for the participant table) and given either by a command or in the
// "python" form, then its process keys as the host has them.

#include "shared/records.hpp"
#include "supervisor/config/sections.hpp"

#include <algorithm>
#include <map>

namespace comfy::supervisor::config_loader {

namespace {

constexpr std::size_t kMaxPackNameLength = kPackNameBytes - 1;  // the record keeps a NUL

std::string count_of(std::size_t count, std::string_view noun) {
    return std::to_string(count) + " " + std::string(noun) + (count == 1 ? "" : "s");
}

std::string pack_name_rule() {
    return "a pack name of 1 to " + std::to_string(kMaxPackNameLength) + " characters from [A-Za-z0-9_-]";
}

bool is_pack_name(std::string_view name) {
    return !name.empty() && name.size() <= kMaxPackNameLength &&
           std::all_of(name.begin(), name.end(), [](char c) {
               return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
           });
}

std::string read_pack_name(const ConfigReader& reader, const Node& node) {
    std::string name = reader.read_string(node, pack_name_rule());
    if (!is_pack_name(name)) reader.fail(node.at, pack_name_rule(), describe_json_value(node.value));
    return name;
}

PackConfig read_pack(const ConfigReader& reader, const Node& node, const std::string& checkout) {
    reader.expect_object(node, {"name", "command", "python", "args", "env_allowlist", "env", "working_directory",
                                "restart", "sandbox"});
    PackConfig pack;
    pack.name = read_pack_name(reader, reader.required(node, "name", pack_name_rule()));
    const auto python = member(node, "python");
    if (python && member(node, "command")) reader.fail(node.at, "exactly one of command and python", "both");
    if (!python) {
        read_command_line(reader, node, pack, "the path of an executable file, or a python section");
    } else {
        // The supervisor makes a Python pack's command line; arguments would go where?
        if (const auto args = member(node, "args")) {
            reader.fail(args->at, "no args beside python (the supervisor makes a Python pack's command line)",
                        describe_json_value(args->value));
        }
        read_python(reader, *python, pack, checkout);
    }
    read_process(reader, node, pack);
    return pack;
}

}  // namespace

std::vector<PackConfig> read_packs(const ConfigReader& reader, const Node& node, std::uint32_t participants,
                                   bool with_host, const std::string& checkout) {
    if (!node.value.is_array()) reader.fail(node.at, "a list of packs", describe_json_value(node.value));
    // With a ComfyUI host, none: ComfyUI runs supervised, its memory arbitrated, before any
    // pack is isolated. Without one, a supervisor of nothing is a mistake.
    if (node.value.empty() && !with_host) reader.fail(node.at, "at least one pack, or a comfyui section", "[]");
    const std::size_t most = participants - 1;  // one participant slot is the ComfyUI host's
    if (node.value.size() > most) {
        reader.fail(node.at,
                    "at most " + count_of(most, "pack") + " (/limits/participants is " + std::to_string(participants) +
                        ", one of them the ComfyUI host)",
                    count_of(node.value.size(), "pack"));
    }
    std::vector<PackConfig> packs;
    std::map<std::string, std::size_t> index_by_name;
    for (std::size_t index = 0; index < node.value.size(); ++index) {
        const Node pack_node{node.value[index], node.at / index};
        PackConfig pack = read_pack(reader, pack_node, checkout);
        // The host's name in the participant table and the logs must name one process.
        if (with_host && pack.name == kHostParticipantName) {
            reader.fail(pack_node.at / "name",
                        "a name other than \"" + std::string(kHostParticipantName) +
                            "\" (the ComfyUI host's, from /comfyui)",
                        describe_json_value(pack.name));
        }
        const auto [first, inserted] = index_by_name.emplace(pack.name, index);
        if (!inserted) {
            reader.fail(pack_node.at / "name", "a name no other pack has",
                        describe_json_value(pack.name) + " (also the name of " + path_text(node.at / first->second) +
                            ")");
        }
        packs.push_back(std::move(pack));
    }
    return packs;
}

}  // namespace comfy::supervisor::config_loader
