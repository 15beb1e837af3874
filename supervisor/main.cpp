// comfy-supervisor: runs one worker per node pack under one event loop and keeps the
// machine's shared-memory segment.
//
//   comfy-supervisor run --config FILE [--instance NAME] [--workload FILE [--keep-running]] [--record FILE]
//   comfy-supervisor check CONFIG
//   comfy-supervisor replay TRACE.jsonl
// Exit statuses: supervisor/config/supervisor_options.cpp (each command's --help).

#include "supervisor/arbiter/trace.hpp"
#include "supervisor/check/config_check.hpp"
#include "supervisor/config/supervisor_options.hpp"
#include "supervisor/lifecycle/sandbox_check.hpp"
#include "supervisor/ops/summary.hpp"
#include "supervisor/ops/systemd_notify.hpp"
#include "supervisor/supervisor.hpp"

#include <sys/prctl.h>

#include <cstdio>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>

int main(int argc, char* argv[]) {
    using namespace comfy::supervisor;
    CommandLine line;
    try {
        line = parse_command_line(std::vector<std::string>(argv + 1, argv + argc));
    } catch (const comfy::cli::UsageError& error) {
        std::fprintf(stderr, "comfy-supervisor: %s\n", error.what());
        return 2;
    }
    if (line.action == CommandLine::Action::print) return std::fputs(line.text.c_str(), stdout) < 0 ? 1 : 0;
    if (line.action == CommandLine::Action::check) return run_check_command(line.check_config);
    if (line.action == CommandLine::Action::replay) return comfy::arbiter::run_replay_command(line.trace);
    // Not dumpable: another process of our user (a pack's worker among them) can then
    // neither ptrace the supervisor nor open its /proc/PID/mem, environ or fd/, which
    // become root's, so it cannot read the workers' tokens from our memory or take our
    // descriptors. Workers are unaffected: exec of a program that changes no credentials
    // makes a process dumpable again. The price is that the supervisor leaves no core dump.
    ::prctl(PR_SET_DUMPABLE, 0);
    const RunOptions& options = line.run;
    std::optional<Config> config;
    std::optional<Workload> workload;
    try {
        config = load_config(options.config);
        if (options.workload) workload = load_workload(*options.workload, *config);
        if (const auto problem = sandbox_problem(*config)) throw std::runtime_error(*problem);
        comfy::ipc::segment_name(options.instance);  // a bad --instance is a usage error too
    } catch (const std::exception& e) {
        std::fprintf(stderr, "comfy-supervisor: %s\n", e.what());
        return 2;
    }
    try {
        await_configured_device(config->device, tell_systemd_device_wait);
        const auto start_limit = start_limit_of(*config);
        Supervisor supervisor(std::move(*config), options.instance);
        SystemdNotify systemd(supervisor, start_limit);
        if (options.record) {
            // Before anything is spawned, so a trace file that cannot be written is a bad
            // argument like a bad config: status 2, and nothing left running.
            try {
                supervisor.record_to(*options.record);
            } catch (const comfy::arbiter::TraceError& e) {
                std::fprintf(stderr, "comfy-supervisor: %s\n", e.what());
                return 2;
            }
        }
        std::optional<WorkloadRunner> runner;
        bool summarized = false;
        if (workload) {
            runner.emplace(supervisor, std::move(*workload));
            std::function<void()> finished;
            if (options.keep_running) {
                finished = [&] {
                    print_summary(supervisor.totals(), supervisor.view().device_total_bytes(), *runner);
                    std::fflush(stdout);
                    summarized = true;
                    log_line("workload finished; still running until SIGTERM or SIGINT (--keep-running)");
                };
            }
            runner->start(std::move(finished));
        }
        const int code = supervisor.run();
        if (!runner) return code;
        if (!summarized) print_summary(supervisor.totals(), supervisor.view().device_total_bytes(), *runner);
        return runner->outcome().prompts_failed == 0 ? code : 1;
    } catch (const DeviceUnavailable& e) {
        std::fprintf(stderr, "comfy-supervisor: %s\n", e.what());
        return 2;
    } catch (const DeviceNotReady& e) {
        // The GPU may come yet (a driver still loading): a status systemd restarts.
        std::fprintf(stderr, "comfy-supervisor: %s\n", e.what());
        return kDeviceNotReadyStatus;
    } catch (const comfy::ipc::InstanceTaken& e) {
        // Starting again cannot work while that supervisor runs.
        std::fprintf(stderr, "comfy-supervisor: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "comfy-supervisor: %s\n", e.what());
        return 1;
    }
}
