#include "supervisor/ctl/control_path.hpp"

#include <unistd.h>

#include <cstdlib>

namespace comfy::ctl {

namespace {

// An environment variable's value when it names an absolute path, else empty: a relative
// one would depend on where each program happened to start.
std::string absolute_variable(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr && value[0] == '/' ? std::string(value) : std::string();
}

}  // namespace

std::filesystem::path control_directory() {
    // systemd sets RuntimeDirectory= as a colon-separated list, made for the service alone.
    if (auto runtime = absolute_variable("RUNTIME_DIRECTORY"); !runtime.empty()) {
        return runtime.substr(0, runtime.find(':'));
    }
    if (const auto user = absolute_variable("XDG_RUNTIME_DIR"); !user.empty()) {
        return std::filesystem::path(user) / "comfy-supervisor";
    }
    return "/tmp/comfy-supervisor-" + std::to_string(::geteuid());
}

std::filesystem::path control_socket_path(const std::string& instance) {
    return control_directory() / (instance + ".sock");
}

std::filesystem::path control_socket_to_reach(const std::string& instance) {
    std::error_code ignored;
    const auto own = control_socket_path(instance);
    if (std::filesystem::exists(own, ignored)) return own;
    const auto service = std::filesystem::path("/run/comfy-supervisor") / instance / (instance + ".sock");
    return std::filesystem::exists(service, ignored) ? service : own;
}

}  // namespace comfy::ctl
