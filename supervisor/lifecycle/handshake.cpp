#include "supervisor/lifecycle/handshake.hpp"

#include "supervisor/lifecycle/sandbox.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace comfy::supervisor {

namespace {

// Compares in time independent of where the first difference is.
bool same_token(const std::uint8_t* a, const std::uint8_t* b, std::size_t n) {
    std::uint8_t difference = 0;
    for (std::size_t i = 0; i < n; ++i) difference = static_cast<std::uint8_t>(difference | (a[i] ^ b[i]));
    return difference == 0;
}

}  // namespace

worker::Token new_token() {
    worker::Token token{};
    if (::getrandom(token.data(), token.size(), 0) != static_cast<ssize_t>(token.size())) {
        throw std::runtime_error(std::string("getrandom failed: ") + std::strerror(errno));
    }
    return token;
}

std::optional<std::string> hello_problem(const WorkerProcess& worker, const Message& message) {
    const auto* hello = std::get_if<Hello>(&message.payload);
    if (hello == nullptr) return std::string("sent ") + std::string(to_string(message.type())) + " before Hello";
    if (hello->layout_version != kLayoutVersion) {
        return "speaks layout version " + std::to_string(hello->layout_version) + ", the supervisor " +
               std::to_string(kLayoutVersion) + "; rebuild the worker against this version";
    }
    if (!same_token(hello->token, worker.token.data(), worker.token.size())) return "presented a wrong token";
    // A sandboxed worker sees itself under another pid, in the sandbox's own namespace.
    const bool own_pid = worker.pack.sandbox ? is_inner_pid_of(worker.process.pid, hello->pid)
                                             : hello->pid == worker.process.pid;
    if (!own_pid) {
        return "claims pid " + std::to_string(hello->pid) + ", spawned as " + std::to_string(worker.process.pid) +
               (worker.pack.sandbox ? " (a sandbox)" : "");
    }
    return std::nullopt;
}

std::optional<std::string> ready_problem(const WorkerProcess& worker) {
    if ((worker.capabilities & kCapReadyLater) == 0) return "sent ready, but its Hello did not say it would";
    if (!worker.starting()) return "sent a second ready";
    return std::nullopt;
}

std::optional<std::string> ready_warning(const WorkerProcess& worker) {
    if (!worker.pack.python || worker.node_classes != 0) return std::nullopt;
    const PythonPack& python = *worker.pack.python;
    const std::string add = python.build_command.empty() ? "comfyctl pack add " + python.folders.front()
                                                         : python.build_command;
    return "pack " + worker.pack.name + " registered no node classes, so ComfyUI has none of its nodes: check that " +
           "its __init__.py sets NODE_CLASS_MAPPINGS, what its import printed in this log, and whether it needs its " +
           "install.py run (" + add + " --run-install-py)";
}

}  // namespace comfy::supervisor
