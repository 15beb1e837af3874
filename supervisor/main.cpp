// comfy-supervisor: runs one worker per node pack under one event loop and keeps the
// machine's shared-memory segment.
//
//   comfy-supervisor run --config FILE [--instance NAME] [--workload FILE] [--record FILE]
//   comfy-supervisor replay TRACE.jsonl

#include "supervisor/arbiter/trace.hpp"
#include "supervisor/sandbox_check.hpp"
#include "supervisor/summary.hpp"
#include "supervisor/systemd_notify.hpp"

#include <sys/prctl.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <stdexcept>

namespace {

constexpr const char* kUsage =
    "usage: comfy-supervisor run --config FILE [--instance NAME] [--workload FILE] [--record FILE]"
    " | comfy-supervisor replay TRACE.jsonl";

struct Options {
    std::string config;
    std::string instance = "default";
    std::optional<std::string> workload;
    std::optional<std::string> record;
};

[[noreturn]] void usage_error(const std::string& what) {
    std::fprintf(stderr, "comfy-supervisor: %s; %s\n", what.c_str(), kUsage);
    std::exit(2);
}

Options parse_arguments(int argc, char* argv[]) {
    if (argc >= 2 && std::strcmp(argv[1], "--help") == 0) {
        std::puts(kUsage);
        std::exit(0);
    }
    if (argc < 2 || std::strcmp(argv[1], "run") != 0) usage_error("expected the command 'run' or 'replay'");
    Options options;
    for (int i = 2; i < argc; ++i) {
        const std::string flag = argv[i];
        if (i + 1 >= argc) usage_error(flag + " needs a value");
        const std::string value = argv[++i];
        if (flag == "--config") {
            options.config = value;
        } else if (flag == "--instance") {
            options.instance = value;
        } else if (flag == "--workload") {
            options.workload = value;
        } else if (flag == "--record") {
            options.record = value;
        } else {
            usage_error("unknown option '" + flag + "'");
        }
    }
    if (options.config.empty()) usage_error("--config is required");
    return options;
}

}  // namespace

int main(int argc, char* argv[]) {
    using namespace comfy::supervisor;
    if (argc >= 2 && std::strcmp(argv[1], "replay") == 0) {
        if (argc != 3) usage_error("replay takes one trace file");
        return comfy::arbiter::run_replay_command(argv[2]);
    }
    // Not dumpable: another process of our user (a pack's worker among them) can then
    // neither ptrace the supervisor nor open its /proc/PID/mem, environ or fd/, which
    // become root's, so it cannot read the workers' tokens from our memory or take our
    // descriptors. Workers are unaffected: exec of a program that changes no credentials
    // makes a process dumpable again. The price is that the supervisor leaves no core dump.
    ::prctl(PR_SET_DUMPABLE, 0);
    const Options options = parse_arguments(argc, argv);
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
        Supervisor supervisor(std::move(*config), options.instance);
        SystemdNotify systemd(supervisor);
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
        if (workload) {
            runner.emplace(supervisor, std::move(*workload));
            runner->start();
        }
        const int code = supervisor.run();
        if (!runner) return code;
        print_summary(supervisor, *runner);
        return runner->outcome().prompts_failed == 0 ? code : 1;
    } catch (const DeviceUnavailable& e) {
        std::fprintf(stderr, "comfy-supervisor: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "comfy-supervisor: %s\n", e.what());
        return 1;
    }
}
