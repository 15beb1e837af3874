#pragma once
// A participant proves who it is with its first message: a Hello that speaks this
// supervisor's layout, presents the one-time token its life was spawned with, and names
// the pid the supervisor spawned (as the sandbox's own namespace numbers it, when there is
// one). Anything else ends that life before it can act. A participant whose Hello says
// it joins before its start-up is done (kCapReadyLater: a Python pack's worker, which
// imports the pack after joining) is spawning until it sends `ready`, once.

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

// Why a `ready` from `worker`, past its Hello, is out of place; nothing when it ends the
// start-up its Hello announced.
std::optional<std::string> ready_problem(const WorkerProcess& worker);

// What an operator should look at in `worker`, ready now: a Python pack whose worker
// registered no node class (nothing of it reaches ComfyUI, yet it imported without an
// error); nothing otherwise.
std::optional<std::string> ready_warning(const WorkerProcess& worker);

}  // namespace comfy::supervisor
