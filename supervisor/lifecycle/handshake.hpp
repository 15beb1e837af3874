#pragma once
// A participant proves who it is with its first message: a Hello that speaks this
// supervisor's layout, presents the one-time token its life was spawned with, and names
// the pid the supervisor spawned (as the sandbox's own namespace numbers it, when there is
// one). Anything else ends that life before it can act.

#include "shared/message_codec.hpp"
#include "supervisor/lifecycle/worker_process.hpp"
#include "worker/worker_environment.hpp"

#include <optional>
#include <string>

namespace comfy::supervisor {

// A new token for one life, from the kernel's random source. Throws std::runtime_error
// when there is none.
worker::Token new_token();

// Why `message`, the first of `worker`'s life, does not admit it; nothing when it does.
std::optional<std::string> hello_problem(const WorkerProcess& worker, const Message& message);

}  // namespace comfy::supervisor
