#pragma once
// How a sandboxed worker sees the files it needs. The sandbox shows the file system
// read-only but mounts /tmp, /run, /dev and /proc afresh (lifecycle/sandbox.cpp): a file
// there is hidden unless bound into it, and a folder that is or holds one of those (or lies
// inside /proc) cannot be shown without undoing the sandbox. Used at load for what the
// config names, and at each start for a pack's environment, which may be missing at load
// or rebuilt from another Python since.

#include <array>
#include <filesystem>
#include <string_view>
#include <vector>

namespace comfy::supervisor {

// The folders the sandbox mounts afresh, each hiding the host's.
inline constexpr std::array<std::string_view, 4> kSandboxOwn = {"/tmp", "/run", "/dev", "/proc"};

enum class SandboxSight {
    seen,        // under the read-only root as it is
    hidden,      // under a folder of the sandbox's own: bound read-only to be seen
    unshowable,  // is, holds or lies inside what the sandbox makes its own
};

SandboxSight sandbox_sight(const std::filesystem::path& path);

// `path` as a worker is given it and, where links lead elsewhere, as they resolve: a bind
// of each makes it reachable both ways.
std::vector<std::filesystem::path> given_and_real(const std::filesystem::path& path);

// What `interpreter` runs from, of what is there now: its venv (the folder of pyvenv.cfg,
// which Python looks for beside the program it was started as and one folder up), its
// program with links resolved (a venv's python links to its base's), and the standard
// library beside that: PREFIX/lib and PREFIX/lib64 of PREFIX/bin/python.
std::vector<std::filesystem::path> interpreter_needs(const std::filesystem::path& interpreter);

// The paths `interpreter` runs from that a sandbox hides, given and real, to bind into it.
// One no sandbox can show is left out: binding it would undo the sandbox.
std::vector<std::filesystem::path> hidden_interpreter_paths(const std::filesystem::path& interpreter);

}  // namespace comfy::supervisor
