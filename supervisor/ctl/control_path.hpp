#pragma once
// Where a supervisor's control socket is, as the supervisor and comfyctl both work it out
// (docs/SECURITY.md, "The control socket"): a folder of its user's alone, then one socket
// per instance.

#include <filesystem>
#include <string>

namespace comfy::ctl {

// $RUNTIME_DIRECTORY (the first of its folders) when systemd set one for the service,
// else $XDG_RUNTIME_DIR/comfy-supervisor, else /tmp/comfy-supervisor-UID (the effective uid).
std::filesystem::path control_directory();

// control_directory()/INSTANCE.sock.
std::filesystem::path control_socket_path(const std::string& instance);

// Where comfyctl finds it: control_socket_path(instance) when that exists, else the
// systemd unit's (deploy/systemd: RuntimeDirectory=comfy-supervisor/INSTANCE) when that
// does, as an operator's shell has no RUNTIME_DIRECTORY; control_socket_path otherwise.
std::filesystem::path control_socket_to_reach(const std::string& instance);

}  // namespace comfy::ctl
