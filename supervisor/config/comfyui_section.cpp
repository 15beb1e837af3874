// Reads /comfyui, the ComfyUI host: a pack's process keys, without a name (it is always
// the host), the ComfyUI checkout the Python packs import by default (config.cpp reads
// that one and hands it to them), and what the host forwards of the packs' messages to
// the browser. It always bridges.

#include "shared/byte_size.hpp"
#include "supervisor/config/sections.hpp"

namespace comfy::supervisor::config_loader {

namespace {

// A message's frame on the call socket is at most 64 MiB (bridge/channel.py); one of at
// most 1 KiB would refuse a pack's ordinary status messages.
constexpr Range kBrowserMessageBytes{std::uint64_t{1} << 10, std::uint64_t{64} << 20};
constexpr Range kBrowserMessagesPerSecond{1, 1'000'000};
constexpr Range kBrowserBytesPerSecond{std::uint64_t{1} << 10, std::uint64_t{1} << 40};

BrowserMessageLimits read_browser_messages(const ConfigReader& reader, const Node& node) {
    reader.expect_object(node, {"max_bytes", "per_second", "bytes_per_second"});
    BrowserMessageLimits limits;
    if (const auto bytes = member(node, "max_bytes")) limits.max_bytes = reader.read_size(*bytes, kBrowserMessageBytes);
    if (const auto count = member(node, "per_second")) limits.per_second = reader.read_unsigned(*count, kBrowserMessagesPerSecond);
    const auto rate = member(node, "bytes_per_second");
    if (rate) limits.bytes_per_second = reader.read_size(*rate, kBrowserBytesPerSecond);
    // A second's bytes are the most one burst may carry: a larger message could never pass.
    if (limits.bytes_per_second < limits.max_bytes) {
        reader.fail(rate ? rate->at : node.at / "bytes_per_second",
                    "bytes_per_second of at least max_bytes (" + format_byte_size_exact(limits.max_bytes) +
                        "): a message larger than a second's bytes could never be sent",
                    format_byte_size_exact(limits.bytes_per_second));
    }
    return limits;
}

}  // namespace

PackConfig read_comfyui(const ConfigReader& reader, const Node& node) {
    reader.expect_object(node, {"command", "args", "env_allowlist", "env", "working_directory", "restart", "sandbox",
                                "checkout", "arena_bytes", "browser_messages"});
    PackConfig host;
    host.name = kHostParticipantName;
    host.bridges = true;
    if (const auto arena = member(node, "arena_bytes")) host.arena_bytes = reader.read_size(*arena, kArenaBytes);
    if (const auto browser = member(node, "browser_messages")) host.browser_messages = read_browser_messages(reader, *browser);
    read_command_line(reader, node, host, "the path of an executable file");
    read_process(reader, node, host);
    return host;
}

}  // namespace comfy::supervisor::config_loader
