#include "supervisor/check/config_check.hpp"

#include "shared/json_errors.hpp"
#include "supervisor/check/python_probes.hpp"
#include "supervisor/config/environment_problem.hpp"
#include "supervisor/lifecycle/sandbox_check.hpp"

#include <cstdio>
#include <exception>
#include <filesystem>
#include <optional>
#include <system_error>

namespace comfy::supervisor {

namespace {

namespace fs = std::filesystem;

// Nothing when `folder` is a ComfyUI checkout: what a Python pack's worker puts first on
// its module path to import ComfyUI's comfy package.
std::optional<std::string> checkout_problem(const std::string& folder, const std::string& at) {
    std::error_code error;
    if (fs::is_regular_file(fs::path(folder) / "comfy" / "model_management.py", error)) return std::nullopt;
    return "at " + at + ": " + folder +
           " is not a ComfyUI checkout (it has no comfy/model_management.py); name the folder of ComfyUI's main.py "
           "there";
}

// Nothing when the script a Python host runs is there: its first argument that is not an
// option (nor an option's value), when that ends in .py, from its working directory.
std::optional<std::string> script_problem(const PackConfig& host) {
    for (std::size_t index = 0; index < host.args.size(); ++index) {
        const std::string& arg = host.args[index];
        if (arg == "-c" || arg == "-m") return std::nullopt;  // no script: a command or a module
        if (arg == "-W" || arg == "-X") ++index;              // the options that take a value
        if (arg.starts_with("-")) continue;
        if (!arg.ends_with(".py")) return std::nullopt;
        std::error_code error;
        const fs::path script = fs::path(host.working_directory) / arg;
        if (fs::is_regular_file(script, error)) return std::nullopt;
        return "at /comfyui/args/" + std::to_string(index) + ": " + script.lexically_normal().string() +
               " is not a file (arguments are taken from /comfyui/working_directory, " + host.working_directory +
               "); name ComfyUI's main.py there";
    }
    return std::nullopt;
}

// Each wheelhouse of /environments/find_links that is not there:
// `comfyctl pack add` would find no package in it.
std::vector<std::string> wheelhouse_problems(const EnvironmentsConfig& environments) {
    std::vector<std::string> problems;
    for (std::size_t index = 0; index < environments.find_links.size(); ++index) {
        const std::string& link = environments.find_links[index];
        std::error_code error;
        if (fs::is_directory(link, error)) continue;
        problems.push_back("at /environments/find_links/" + std::to_string(index) + ": " + link +
                           " is not a folder, so comfyctl pack add would find no wheel there; make it, or take it out");
    }
    return problems;
}

class Checker {
public:
    Checker(const Config& config, CheckReport& report) : config_(config), report_(report) {}

    void check() {
        // The sandboxed packs' imports run in their sandbox: not when none can be made.
        const auto sandbox = sandbox_problem(config_);
        if (sandbox) report_.problems.push_back(*sandbox);
        for (const auto& problem : wheelhouse_problems(config_.environments)) add(problem);
        if (config_.comfyui) check_host(*config_.comfyui);
        for (std::size_t index = 0; index < config_.packs.size(); ++index) {
            check_pack(config_.packs[index], "/packs/" + std::to_string(index), !sandbox);
        }
        if (report_.problems.empty()) report_.summary = summary();
    }

private:
    void add(const std::optional<std::string>& problem) {
        if (problem) report_.problems.push_back(json_file_message(config_.source, *problem));
    }

    void check_host(const PackConfig& host) {
        if (!config_.comfyui_checkout.empty()) add(checkout_problem(config_.comfyui_checkout, "/comfyui/checkout"));
        if (!looks_like_python(host.command)) return;
        add(interpreter_problem(prober_, host, host.command, "/comfyui/command", config_.limits.handshake_timeout));
        add(script_problem(host));
    }

    void check_pack(const PackConfig& pack, const std::string& at, bool sandboxes) {
        if (!pack.python) {
            if (looks_like_python(pack.command)) {
                add(interpreter_problem(prober_, pack, pack.command, at + "/command",
                                        config_.limits.handshake_timeout));
            }
            return;
        }
        const PythonPack& python = *pack.python;
        const auto checkout = checkout_problem(python.comfyui, at + "/python/comfyui");
        if (python.comfyui != config_.comfyui_checkout) add(checkout);  // the host's is told once, with the host
        // `run` starts without it and fails this pack alone; here it stops the check.
        if (!python.environment.empty()) {
            const auto environment = environment_state(pack);
            if (environment.fault != EnvironmentFault::none) {
                add("at " + at + "/python/environment: " + environment.line);
                return;
            }
        }
        const std::string interpreter_at = at + (python.environment.empty() ? "/python/interpreter" : "/python/environment");
        const auto interpreter =
            interpreter_problem(prober_, pack, python.interpreter, interpreter_at, config_.limits.handshake_timeout);
        add(interpreter);
        // An import that cannot work would only repeat the problem above.
        if (interpreter || checkout || (pack.sandbox && !sandboxes)) return;
        const ImportOutcome outcome = import_outcome(prober_, pack, at + "/python/pack", config_.limits.ready_timeout);
        add(outcome.problem);
        if (outcome.problem) return;
        std::string imported = pack.name;
        if (const auto nodes = outcome.nodes) {
            imported += " (" + std::to_string(*nodes) + (*nodes == 1 ? " node class)" : " node classes)");
        }
        imported_.push_back(std::move(imported));
    }

    std::string summary() const {
        const std::size_t packs = config_.packs.size();
        std::string text = (config_.comfyui ? "the ComfyUI host and " : "") + std::to_string(packs) +
                           (packs == 1 ? " pack" : " packs");
        if (!imported_.empty()) {
            text += "; each Python pack imports:";
            for (std::size_t index = 0; index < imported_.size(); ++index) {
                text += (index ? ", " : " ") + imported_[index];
            }
        }
        return json_file_message(config_.source, "OK: " + text);
    }

    const Config& config_;
    CheckReport& report_;
    Prober prober_;
    std::vector<std::string> imported_;  // each Python pack's name, and its node classes
};

}  // namespace

CheckReport check_config(const std::string& file) {
    CheckReport report;
    Config config;
    try {
        config = load_config(file);
    } catch (const ConfigError& error) {
        report.problems.push_back(error.what());
        return report;
    }
    Checker(config, report).check();
    return report;
}

int run_check_command(const std::string& file) {
    CheckReport report;
    try {
        report = check_config(file);
    } catch (const std::exception& error) {
        report.problems.push_back(json_file_message(file, std::string("cannot be checked: ") + error.what()));
    }
    for (const auto& problem : report.problems) std::fprintf(stderr, "comfy-supervisor: %s\n", problem.c_str());
    if (!report.problems.empty()) return 2;
    return std::printf("comfy-supervisor: %s\n", report.summary.c_str()) < 0 ? 2 : 0;
}

}  // namespace comfy::supervisor
