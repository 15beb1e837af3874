#pragma once
// The parsers of a config file's sections, one file each, which config.cpp calls in the
// file's order. Each is given its section as a Node and reports any problem in it through
// the ConfigReader (config_reader.hpp); what one section needs of another (the capacities
// under /limits, whether there is a host) it is given as an argument. Private to
// supervisor/config/.

#include "supervisor/config/config.hpp"
#include "supervisor/config/config_reader.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace comfy::supervisor::config_loader {

// A value arena below a mebibyte holds no image worth passing; above a tebibyte the
// figure is a typo (it is sparse, so the size costs nothing until written).
inline constexpr Range kArenaBytes{std::uint64_t{1} << 20, std::uint64_t{1} << 40};

// Where a Python pack's interpreter finds comfy_supervisor (python_section.cpp), counted
// with the rest of its environment (process_section.cpp).
inline constexpr const char* kPythonPathVariable = "PYTHONPATH";

// /device (device_section.cpp)
DeviceConfig read_device(const ConfigReader& reader, const Node& node);

// /limits (limits_section.cpp)
Limits read_limits(const ConfigReader& reader, const Node& node);

// /memory and /host, device memory and host RAM (memory_section.cpp); a ledger quota is
// checked against the ledger's rows.
MemoryConfig read_memory(const ConfigReader& reader, const Node& node, const Capacities& capacities);
HostMemoryConfig read_host(const ConfigReader& reader, const Node& node);

// /http (http_section.cpp), and its token_file (token_file.cpp): the token itself.
HttpConfig read_http(const ConfigReader& reader, const Node& node);
std::string read_token_file(const ConfigReader& reader, const Node& node);

// /environments, what the pack tool builds environments with (environments_section.cpp).
EnvironmentsConfig read_environments(const ConfigReader& reader, const Node& node);

// /comfyui, the ComfyUI host's process (comfyui_section.cpp). Its checkout is read by
// config.cpp, which hands it to the packs.
PackConfig read_comfyui(const ConfigReader& reader, const Node& node);

// /packs (packs_section.cpp): at most `participants` less one, the host's slot; no pack
// takes the host's name when `with_host`. A Python pack that names no ComfyUI checkout
// takes `checkout` (/comfyui/checkout; empty when not given).
std::vector<PackConfig> read_packs(const ConfigReader& reader, const Node& node, std::uint32_t participants,
                                   bool with_host, const std::string& checkout);

// What starts and restarts a process, the same for a pack's worker and the host
// (process_section.cpp): the command and its args, for a process given by command
// (`what` says what a missing one should be), then its environment, working directory,
// restart policy and sandbox, the whole command line measured against what exec takes.
void read_command_line(const ConfigReader& reader, const Node& node, PackConfig& process, std::string_view what);
void read_process(const ConfigReader& reader, const Node& node, PackConfig& process);

// A pack's "python" section (python_section.cpp); then, once its environment is read, the
// PYTHONPATH the supervisor gives it, and once its sandbox is, its command line.
void read_python(const ConfigReader& reader, const Node& node, PackConfig& pack, const std::string& checkout);
void add_python_path(const ConfigReader& reader, const Node& node, PackConfig& pack);
// `config_file` (absolute) and the pack's name are for the worker's messages: the command
// that rebuilds the pack's environment names both.
std::vector<std::string> pack_worker_args(const PackConfig& pack, const std::string& config_file);

// A sandboxed Python pack's sandbox, once read: what its worker needs that the sandbox would
// hide (its pack folders, checkout, interpreter and venv, the supervisor's package and
// library) joins its readable list, or is refused when no sandbox can show it
// (python_sandbox.cpp).
void add_python_sandbox_paths(const ConfigReader& reader, const Node& node, PackConfig& pack);

// A process's sandbox (sandbox_section.cpp); its working directory is writable in it.
SandboxConfig read_sandbox(const ConfigReader& reader, const Node& node, const std::string& working_directory);

}  // namespace comfy::supervisor::config_loader
