#include "tests/support/supervisor_process.hpp"

#include "supervisor/ctl/control_path.hpp"

#include "ipc/shm_segment.hpp"
#include "shared/segment_layout.hpp"
#include "tests/support/sanitizer_reports.hpp"
#include "tests/support/test_instance.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

namespace comfy::test {

TempFolder::TempFolder(const std::string& tag, const std::filesystem::path& under)
    : path_(under / ("comfy-test-" + test_instance(tag))) {
    std::filesystem::create_directories(path_);
}

TempFolder::~TempFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
}

std::filesystem::path TempFolder::write(const std::string& name, const std::string& text) const {
    const auto file = path_ / name;
    std::ofstream(file) << text;
    return file;
}

SupervisorProcess::SupervisorProcess(const nlohmann::json& config, const std::optional<nlohmann::json>& workload,
                                     const std::string& instance, const std::vector<std::string>& extra_args)
    : folder_("sv"), instance_(instance.empty() ? test_instance("sv") : instance) {
    const auto config_file = folder_.write("config.json", with_sanitizer_environment(config).dump(2));
    std::vector<std::string> args{supervisor_binary(), "run", "--config", config_file.string(), "--instance", instance_};
    if (workload) {
        args.push_back("--workload");
        args.push_back(folder_.write("workload.json", workload->dump(2)).string());
    }
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    const auto stdout_file = (folder_.path() / "stdout.txt").string();
    const auto stderr_file = (folder_.path() / "stderr.txt").string();
    child_ = std::make_unique<ChildProcess>([args, stdout_file, stderr_file] {
        const int out = ::open(stdout_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        const int err = ::open(stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ::dup2(out, STDOUT_FILENO);
        ::dup2(err, STDERR_FILENO);
        std::vector<char*> argv;
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execv(argv[0], argv.data());
        return 127;
    });
}

SupervisorProcess::~SupervisorProcess() {
    if (!exited_) {
        child_->kill(SIGKILL);
        child_->wait();
    }
    // Its workers die with it (PR_SET_PDEATHSIG); reap them, as their subreaper.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (std::chrono::steady_clock::now() < deadline) {
        const pid_t reaped = ::waitpid(-1, nullptr, WNOHANG);
        if (reaped < 0) break;  // no children left
        if (reaped == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ipc::remove_stale_segment(ipc::segment_name(instance_));
    // A supervisor killed with SIGKILL leaves its control socket's file (the next one of
    // the instance would replace it); nothing of a test stays behind.
    std::error_code ignored;
    std::filesystem::remove(ctl::control_socket_path(instance_), ignored);
}

std::vector<Participant> SupervisorProcess::participants() const {
    std::vector<Participant> table;
    try {
        auto segment = attach_segment(instance_);
        const auto view = view_of(segment);
        for (std::uint32_t slot = 0; slot < view.capacities().participants; ++slot) {
            ParticipantRecord record{};
            if (view.participant(slot).record.read(record) != ipc::SeqlockRead::ok) continue;
            // A pack failed before its first life (its environment missing) has a state, no generation.
            if (record.generation == 0 && record.state == static_cast<std::uint8_t>(ParticipantState::empty)) continue;
            table.push_back({slot, std::string(record.name, strnlen(record.name, sizeof record.name)), record.pid,
                             record.generation, static_cast<ParticipantState>(record.state), record.restarts,
                             record.last_exit_status, record.last_exit_signal, (record.flags & kParticipantDeaf) != 0});
        }
    } catch (const ipc::SegmentError&) {
        // Not created yet, or already gone.
    }
    return table;
}

std::vector<LedgerRecord> SupervisorProcess::ledger() const {
    std::vector<LedgerRecord> entries;
    try {
        auto segment = attach_segment(instance_);
        const auto view = view_of(segment);
        for (std::uint32_t i = 0; i < view.capacities().ledger_entries; ++i) {
            LedgerRecord record{};
            if (view.ledger(i).entry.read(record) == ipc::SeqlockRead::ok && record.owner_generation != 0) {
                entries.push_back(record);
            }
        }
    } catch (const ipc::SegmentError&) {
        // Not created yet, or already gone.
    }
    return entries;
}

std::optional<Participant> SupervisorProcess::participant(const std::string& pack) const {
    for (const auto& p : participants()) {
        if (p.name == pack) return p;
    }
    return std::nullopt;
}

bool SupervisorProcess::wait_for(const std::function<bool(const std::vector<Participant>&)>& predicate,
                                 std::chrono::milliseconds timeout) const {
    return eventually([&] { return predicate(participants()); }, timeout);
}

bool SupervisorProcess::wait_for_state(const std::string& pack, ParticipantState state,
                                       std::chrono::milliseconds timeout) const {
    return eventually([&] {
        const auto found = participant(pack);
        return found && found->state == state;
    }, timeout);
}

std::string SupervisorProcess::log() const { return read_file(folder_.path() / "stderr.txt"); }
std::string SupervisorProcess::output() const { return read_file(folder_.path() / "stdout.txt"); }

int SupervisorProcess::stop() {
    child_->kill(SIGTERM);
    return wait();
}

int SupervisorProcess::wait() {
    const int code = child_->wait();
    exited_ = true;
    return code;
}

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (condition()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
}

nlohmann::json idle_pack() { return {{"nodes", {{"noop", {{{"op", "compute"}, {"ms", 1}}}}}}}; }

nlohmann::json reference_pack(const TempFolder& folder, const std::string& name, const nlohmann::json& pack) {
    const auto file = folder.write(name + ".pack.json", pack.dump(2));
    return {{"name", name}, {"command", worker_binary()}, {"args", {"--pack", file.string()}}};
}

nlohmann::json step_load(const std::string& model, const std::string& bytes) {
    return {{"op", "load_model"}, {"model", model}, {"bytes", bytes}};
}
nlohmann::json step_compute(int ms) { return {{"op", "compute"}, {"ms", ms}}; }
nlohmann::json step_await_free_below(const std::string& bytes) {
    return {{"op", "await_free_below"}, {"bytes", bytes}, {"ms", 60000}};
}

nlohmann::json node(const std::string& pack, const std::string& name) { return {{"pack", pack}, {"node", name}}; }

nlohmann::json workload_of(const nlohmann::json& prompts, bool parallel) {
    nlohmann::json workload = {{"prompts", prompts}};
    if (parallel) workload["parallel"] = true;
    return workload;
}

nlohmann::json simulated_device() { return {{"kind", "simulated"}, {"total_bytes", "24GiB"}}; }

nlohmann::json memory_config_of(const nlohmann::json& packs, const nlohmann::json& memory, const nlohmann::json& host) {
    nlohmann::json config = {{"device", simulated_device()},
                             // A Python participant's start (torch's import) on a loaded 2-core machine
                             // can pass the default 10 s before its Hello.
                             {"limits", {{"heartbeat_timeout_ms", 20000}, {"handshake_timeout_ms", 60000},
                                         {"shutdown_grace_ms", 1000}}},
                             {"packs", packs}};
    if (!memory.empty()) config["memory"] = memory;
    if (!host.empty()) config["host"] = host;
    return config;
}

std::string supervisor_binary() { return COMFY_SUPERVISOR_PATH; }
std::string worker_binary() { return COMFY_WORKER_PATH; }
std::string comfyctl_binary() { return COMFYCTL_PATH; }
std::string misbehaving_worker_binary() { return MISBEHAVING_WORKER_PATH; }

nlohmann::json misbehaving_pack(const std::string& name, const std::string& mode) {
    return {{"name", name}, {"command", misbehaving_worker_binary()}, {"args", {mode}}, {"restart", {{"max_restarts", 0}}}};
}

std::optional<SummaryRow> census_row(const std::string& output, const std::string& pack) {
    std::istringstream lines(output);
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream fields(line);
        SummaryRow row{};
        fields >> row.pack;
        if (row.pack != pack) continue;
        fields >> row.pid >> row.generation >> row.restarts;
        for (double& figure : row.figures) {
            std::string unit;
            fields >> figure >> unit;
            figure *= unit == "GiB" ? 1073741824.0 : unit == "MiB" ? 1048576.0 : unit == "KiB" ? 1024.0 : 1.0;
        }
        if (!fields) continue;  // a line that only starts with the pack's name
        return row;
    }
    return std::nullopt;
}

double census_figure(const std::string& output, const std::string& pack, int column) {
    const auto row = census_row(output, pack);
    return row ? row->figures[column] : -1;
}

std::size_t count_of(const std::string& text, const std::string& part) {
    std::size_t count = 0;
    for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++count;
    return count;
}

std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::map<std::string, std::string> read_key_values(const std::filesystem::path& path) {
    std::map<std::string, std::string> values;
    std::istringstream lines(read_file(path));
    std::string key;
    std::string value;
    while (lines >> key >> value) values[key] = value;
    return values;
}

CommandRun run_and_capture(const std::string& command) {
    CommandRun run;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) return run;
    run.started = true;
    char buffer[4096];
    while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) run.output += buffer;
    const int raw = ::pclose(pipe);
    if (raw != -1) run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : WIFSIGNALED(raw) ? 128 + WTERMSIG(raw) : -1;
    return run;
}

bool process_exists(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

}  // namespace comfy::test
