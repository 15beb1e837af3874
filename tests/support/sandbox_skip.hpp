#pragma once
// Tests of a sandboxed worker run where bwrap can make a sandbox, and otherwise say why they
// did not run. A test that uses these links comfy_sv_lifecycle (the supervisor's own check).

#include "supervisor/config/config.hpp"
#include "supervisor/lifecycle/sandbox_check.hpp"
#include "tests/support/supervisor_process.hpp"

#include <sys/wait.h>

#include <cerrno>
#include <optional>
#include <string>

namespace comfy::test {

// bwrap's pid 1 may outlive bwrap by a moment; orphaned, it becomes this test process's
// child (a subreaper, for the leak check) and is reaped here.
inline void reap_orphans() {
    eventually([] { return ::waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD; }, std::chrono::seconds(2));
}

// Why bwrap cannot make a sandbox here, or nothing when it can.
inline std::optional<std::string> sandbox_unavailable() {
    supervisor::Config config;
    config.source = "the sandbox tests";
    supervisor::PackConfig pack;
    pack.name = "probe";
    pack.working_directory = "/";
    pack.sandbox = supervisor::SandboxConfig{};
    config.packs.push_back(pack);
    const auto problem = supervisor::sandbox_problem(config);
    reap_orphans();
    return problem;
}

}  // namespace comfy::test

#define SKIP_WITHOUT_BWRAP()                                                     \
    if (const auto reason = comfy::test::sandbox_unavailable()) {                \
        WARN("not run: " << *reason);                                            \
        return;                                                                  \
    }
