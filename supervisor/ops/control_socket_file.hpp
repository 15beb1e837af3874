#pragma once
// The control socket's file: its folder made or checked (ours alone, mode 0700, not a
// link), a stale socket of a dead supervisor replaced (never one a live process accepts
// on), and the listening socket bound with mode 0600, close-on-exec and non-blocking.

#include <filesystem>

namespace comfy::supervisor {

// The listening socket's descriptor. Throws ipc::InstanceTaken when a live process accepts
// on the socket already, ControlSocketError (control_server.hpp) for anything else, with
// one line: the path, what is wrong, and what to do.
int listen_on_control_socket(const std::filesystem::path& path);

}  // namespace comfy::supervisor
