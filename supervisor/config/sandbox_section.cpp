// Reads a process's "sandbox" section (docs/SECURITY.md): the folders bwrap binds
// writable and read-only, each resolved to where it really is, and whether the network
// stays. The keys are the same for a pack's worker and the ComfyUI host. A writable folder
// that holds /dev cannot work: bound over the sandbox's own /dev without device access (as
// bwrap binds), it leaves the worker no device it can open (torch dies on /dev/urandom), so
// it is refused at load.

#include "supervisor/config/sections.hpp"

#include <string_view>
#include <system_error>

namespace comfy::supervisor::config_loader {

namespace {

// Links resolved: bwrap mounts a folder at the path it is given, and a link there
// would be mounted over rather than followed.
fs::path real_path(const ConfigReader& reader, const Node& node, const fs::path& path) {
    std::error_code error;
    fs::path real = fs::canonical(path, error);
    if (error) {
        reader.fail(node.at, "an existing file or folder",
                    describe_json_value(node.value) + " (" + path.string() + ": " + error.message() + ")");
    }
    return real;
}

void check_writable(const ConfigReader& reader, const Pointer& at, const fs::path& folder, std::string_view what) {
    if (is_within(fs::path("/dev"), folder)) {
        reader.fail(at,
                    "a folder that does not hold /dev (bound writable over the sandbox's own, it would leave the "
                    "worker no device it can open)",
                    describe_json_value(folder.string()) + " (" + std::string(what) + ")");
    }
}

void read_sandbox_paths(const ConfigReader& reader, const Node& node, std::vector<std::string>& paths,
                        bool writable) {
    if (!node.value.is_array()) reader.fail(node.at, "a list of paths", describe_json_value(node.value));
    for (std::size_t index = 0; index < node.value.size(); ++index) {
        const Node entry{node.value[index], node.at / index};
        const fs::path path = real_path(reader, entry, reader.read_path(entry, "the path of a file or folder"));
        if (writable) check_writable(reader, entry.at, path, "a writable folder");
        paths.push_back(path.string());
    }
}

}  // namespace

SandboxConfig read_sandbox(const ConfigReader& reader, const Node& node, const std::string& working_directory) {
    reader.expect_object(node, {"writable", "readable", "network"});
    SandboxConfig sandbox;
    const fs::path working = real_path(reader, node, working_directory);
    check_writable(reader, node.at, working, "the working directory, bound writable");
    sandbox.writable.push_back(working.string());
    if (const auto writable = member(node, "writable")) read_sandbox_paths(reader, *writable, sandbox.writable, true);
    if (const auto readable = member(node, "readable")) {
        read_sandbox_paths(reader, *readable, sandbox.readable, false);
    }
    if (const auto network = member(node, "network")) sandbox.network = reader.read_flag(*network);
    return sandbox;
}

}  // namespace comfy::supervisor::config_loader
