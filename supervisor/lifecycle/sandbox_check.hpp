#pragma once
// Whether bwrap can make a sandbox on this machine, checked once at start-up when the
// config asks for one, so that a missing package or a kernel without user namespaces is
// one line then rather than a worker failing at every spawn.

#include "supervisor/config/config.hpp"
#include "supervisor/lifecycle/sandbox.hpp"

#include <optional>
#include <string>

namespace comfy::supervisor {

// Nothing when no participant asks for the sandbox or `bwrap` made one (and ran /bin/true
// in it); otherwise one line naming the config, a participant that asks, what went wrong
// and what to do.
std::optional<std::string> sandbox_problem(const Config& config, const std::string& bwrap = kBwrapPath);

}  // namespace comfy::supervisor
