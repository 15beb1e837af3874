#include "supervisor/check/python_probes.hpp"

#include "supervisor/lifecycle/sandbox.hpp"
#include "supervisor/lifecycle/worker_process.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <sstream>

namespace comfy::supervisor {

namespace {

// The line the worker ends with when a pack cannot be imported (pack_worker/__main__.py).
constexpr std::string_view kWorkerPrefix = "pack_worker: ";

SpawnRequest request_for(const PackConfig& process, const std::string& command, std::vector<std::string> args) {
    SpawnRequest request;
    request.command = command;
    request.args = std::move(args);
    request.environment = configured_environment(process);
    request.working_directory = process.working_directory;
    return request;
}

// How a probe that did not succeed ended, in words.
std::string how_it_ended(const ProbeResult& result) {
    if (!result.failure.empty()) return result.failure;
    const std::string ended = describe_exit(result.status, result.signal);
    const std::string line = last_line(result.output);
    return line.empty() ? ended : ended + ": " + line;
}

// The description the worker printed last (a JSON object, "{" or "{}" on a line of its
// own, indented), after whatever the pack printed at import; nothing if there is none.
std::optional<std::size_t> described_nodes(const std::string& output) {
    for (std::size_t end = output.size(); end > 0;) {
        const std::size_t start = output.rfind('\n', end - 1);
        const std::size_t from = start == std::string::npos ? 0 : start + 1;
        const std::string_view line = std::string_view(output).substr(from, end - from);
        if (line == "{" || line == "{}") {
            std::istringstream text(output.substr(from));
            nlohmann::json nodes;
            try {
                text >> nodes;  // what follows, printed at exit, is not its part
            } catch (const nlohmann::json::exception&) {
                return std::nullopt;
            }
            if (nodes.is_object()) return nodes.size();
            return std::nullopt;
        }
        if (start == std::string::npos) break;
        end = start;
    }
    return std::nullopt;
}

}  // namespace

bool looks_like_python(const std::string& command) {
    const std::string name = std::filesystem::path(command).filename().string();
    if (!name.starts_with("python")) return false;
    return std::all_of(name.begin() + 6, name.end(), [](unsigned char c) { return std::isdigit(c) || c == '.'; });
}

std::optional<std::string> interpreter_problem(Prober& prober, const PackConfig& process,
                                               const std::string& interpreter, const std::string& at,
                                               Milliseconds limit) {
    constexpr int kMajor = COMFY_SV_PYTHON_MIN_MAJOR;
    constexpr int kMinor = COMFY_SV_PYTHON_MIN_MINOR;
    const ProbeResult result = prober.run(
        request_for(process, interpreter, {"-c", "import sys; sys.stdout.write('%d.%d' % sys.version_info[:2])"}),
        limit);
    if (!result.succeeded()) {
        return "at " + at + ": " + interpreter + " does not run (" + how_it_ended(result) +
               "); repair its venv or name another interpreter there";
    }
    int major = 0;
    int minor = 0;
    char dot = 0;
    std::istringstream version(last_line(result.output));
    if (!(version >> major >> dot >> minor) || dot != '.') {
        return "at " + at + ": " + interpreter + " does not say its version as Python does (it wrote \"" +
               last_line(result.output).substr(0, 60) + "\"); name a Python interpreter there";
    }
    if (major < kMajor || (major == kMajor && minor < kMinor)) {
        return "at " + at + ": " + interpreter + " is Python " + std::to_string(major) + "." + std::to_string(minor) +
               ", and comfy_supervisor needs Python " + std::to_string(kMajor) + "." + std::to_string(kMinor) +
               " or newer; name a newer interpreter there";
    }
    return std::nullopt;
}

ImportOutcome import_outcome(Prober& prober, const PackConfig& pack, const std::string& at, Milliseconds limit) {
    // --describe among the worker's own arguments, before ComfyUI's (after "--").
    std::vector<std::string> args = pack.args;
    args.insert(std::find(args.begin(), args.end(), "--"), "--describe");
    const ProbeResult result = prober.run(with_sandbox(pack, request_for(pack, pack.command, std::move(args))), limit);
    ImportOutcome outcome;
    if (result.succeeded()) {
        outcome.nodes = described_nodes(result.output);
        return outcome;
    }
    if (result.timed_out) {
        outcome.problem = "at " + at + ": pack \"" + pack.name + "\" did not import within " +
                          std::to_string(limit.count()) +
                          " ms (/limits/ready_timeout_ms, which bounds its import at every start); make its import "
                          "faster or raise the limit";
        return outcome;
    }
    // The worker's own line, when it said why (a pack that cannot be imported, status 78).
    std::string said;
    std::istringstream lines(result.output);
    for (std::string line; std::getline(lines, line);) {
        if (line.starts_with(kWorkerPrefix)) said = line.substr(kWorkerPrefix.size());
    }
    outcome.problem = "at " + at + ": pack \"" + pack.name + "\" does not import in its worker: " +
                      (said.empty() ? how_it_ended(result) + "; fix the pack or its venv" : said);
    return outcome;
}

}  // namespace comfy::supervisor
