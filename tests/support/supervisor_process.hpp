#pragma once
// A real comfy-supervisor run for multi-process tests: writes its config into a fresh
// folder, starts the binary under a test instance name, reads its participant table
// straight from the segment, and stops it (and checks it stopped) at the end.

#include "shared/records.hpp"
#include "tests/support/child_process.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace comfy::test {

// A folder removed with everything in it when the object goes: in `under`, by default the
// system's temporary folder ($TMPDIR or /tmp).
class TempFolder {
public:
    explicit TempFolder(const std::string& tag,
                        const std::filesystem::path& under = std::filesystem::temp_directory_path());
    ~TempFolder();
    const std::filesystem::path& path() const noexcept { return path_; }
    std::filesystem::path write(const std::string& name, const std::string& text) const;

private:
    std::filesystem::path path_;
};

struct Participant {
    std::uint32_t slot;
    std::string name;
    std::int32_t pid;
    std::uint32_t generation;
    ParticipantState state;
    std::uint32_t restarts;
    std::int32_t last_exit_status;
    std::int32_t last_exit_signal;
    bool deaf;  // its record's kParticipantDeaf
};

class SupervisorProcess {
public:
    // Starts `comfy-supervisor run` with `config` (written as config.json in a fresh folder)
    // and, when given, a workload; under a fresh test instance unless one is given.
    explicit SupervisorProcess(const nlohmann::json& config, const std::optional<nlohmann::json>& workload = {},
                               const std::string& instance = {}, const std::vector<std::string>& extra_args = {});
    ~SupervisorProcess();  // SIGKILL and reap if still running; removes a stale segment

    const std::string& instance() const noexcept { return instance_; }
    pid_t pid() const noexcept { return child_->pid(); }

    // The participant table now; empty until the segment exists.
    std::vector<Participant> participants() const;
    std::optional<Participant> participant(const std::string& pack) const;
    // The ledger's entries now (those with an owner); empty until the segment exists.
    std::vector<LedgerRecord> ledger() const;
    // Polls until `predicate` holds over the table, up to `timeout`; false on time-out.
    bool wait_for(const std::function<bool(const std::vector<Participant>&)>& predicate,
                  std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
    // Polls until `pack`'s participant is in `state`, up to `timeout`; false on time-out.
    bool wait_for_state(const std::string& pack, ParticipantState state,
                        std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
    // What it wrote to stderr (the log) and stdout so far.
    std::string log() const;
    std::string output() const;
    // SIGTERM, then wait; the exit code (or 128 + signal).
    int stop();
    // Waits for it to exit on its own; the exit code.
    int wait();
    void kill(int signal) const { child_->kill(signal); }

private:
    TempFolder folder_;
    std::string instance_;
    std::unique_ptr<ChildProcess> child_;
    bool exited_ = false;
};

// Polls `condition` every 5 ms until it holds, up to `timeout`; false on time-out.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

// A pack description with one trivial node, for workers that only need to be alive.
nlohmann::json idle_pack();

// A pack entry for a config: the reference worker running `pack` (written to the folder).
nlohmann::json reference_pack(const TempFolder& folder, const std::string& name, const nlohmann::json& pack);

// A GiB as a double, for comparing census figures.
inline constexpr double kGiBf = 1073741824.0;

// Steps of a reference worker's node: load `bytes` ("12GiB") as `model`; compute for `ms`.
nlohmann::json step_load(const std::string& model, const std::string& bytes);
nlohmann::json step_compute(int ms);
// Waits (up to a minute) until another participant's load leaves less than `bytes` free.
nlohmann::json step_await_free_below(const std::string& bytes);
// A node of a prompt, and a workload of `prompts` (run one at a time unless `parallel`).
nlohmann::json node(const std::string& pack, const std::string& name);
nlohmann::json workload_of(const nlohmann::json& prompts, bool parallel = false);
// The simulated 24 GiB device, asked for by name: a config without a device section
// supervises the machine's GPU (docs/CONFIG.md, "device").
nlohmann::json simulated_device();

// A config of `packs` on a simulated 24 GiB device, with `memory` and `host` sections where
// given (long heartbeat time-out: a loaded test machine must not make a worker look hung).
nlohmann::json memory_config_of(const nlohmann::json& packs, const nlohmann::json& memory = nlohmann::json::object(),
                                const nlohmann::json& host = nlohmann::json::object());

// Paths of the programs under test, from CMake.
std::string supervisor_binary();
std::string worker_binary();
std::string comfyctl_binary();
std::string misbehaving_worker_binary();
// A pack running misbehaving-worker in `mode`, never restarted: each test sees its one life.
nlohmann::json misbehaving_pack(const std::string& name, const std::string& mode);

// A row of the summary's final census, one per pack: "pack pid gen restarts device pinned rss",
// the byte figures as printed ("7.4 GiB") and read back in bytes.
struct SummaryRow {
    std::string pack;
    long pid;
    unsigned generation;
    unsigned restarts;
    double figures[3];  // 0: device, 1: pinned, 2: resident set
};
std::optional<SummaryRow> census_row(const std::string& output, const std::string& pack);
// The byte figure of `pack`'s census row in `column` (0: device, 1: pinned, 2: resident
// set), in bytes; -1 if the summary has no row for `pack`.
double census_figure(const std::string& output, const std::string& pack, int column);
// How many times `part` occurs in `text`, not overlapping.
std::size_t count_of(const std::string& text, const std::string& part);

// The whole of a file; empty when it cannot be read.
std::string read_file(const std::filesystem::path& path);

// A file of "key value" pairs (a probe's report), by key; empty when it cannot be read.
std::map<std::string, std::string> read_key_values(const std::filesystem::path& path);

// A shell command run to its end with its stdout captured (add 2>&1 for stderr too).
struct CommandRun {
    bool started = false;  // popen succeeded
    int status = -1;       // its exit code, or 128 + the signal that ended it
    std::string output;
};
CommandRun run_and_capture(const std::string& command);

// True while a process with this pid exists (zombies included).
bool process_exists(pid_t pid);

}  // namespace comfy::test
