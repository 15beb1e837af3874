// Reads /comfyui, the ComfyUI host: a pack's process keys, without a name (it is always
// the host), and the ComfyUI checkout the Python packs import by default (config.cpp
// reads that one and hands it to them). It always bridges.

#include "supervisor/config/sections.hpp"

namespace comfy::supervisor::config_loader {

PackConfig read_comfyui(const ConfigReader& reader, const Node& node) {
    reader.expect_object(node, {"command", "args", "env_allowlist", "env", "working_directory", "restart", "sandbox",
                                "checkout", "arena_bytes"});
    PackConfig host;
    host.name = kHostParticipantName;
    host.bridges = true;
    if (const auto arena = member(node, "arena_bytes")) host.arena_bytes = reader.read_size(*arena, kArenaBytes);
    read_command_line(reader, node, host, "the path of an executable file");
    read_process(reader, node, host);
    return host;
}

}  // namespace comfy::supervisor::config_loader
