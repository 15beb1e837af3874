// The config loader: a full config lands in the struct field by field, omitted keys take
// their defaults, sizes take their units, paths are taken from the config's folder; and
// every bad config is refused with one line naming the file, the JSON path, what was
// expected and what was found.
#include <catch2/catch.hpp>

#include "supervisor/config/config.hpp"
#include "supervisor/config/environment_problem.hpp"
#include "supervisor/config/install_layout.hpp"

#include <nlohmann/json.hpp>

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

using namespace comfy::supervisor;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
namespace fs = std::filesystem;

namespace {

// A scratch folder holding a config and what it points at: an executable script
// "worker.sh", a file that is not executable, a link to the script, a folder "sub", and
// custom node packs' folders (with __init__.py): "pack", "other", and "other/pack" of the
// first one's name.
// Removed when the test ends.
class ConfigFolder {
public:
    ConfigFolder() : path_(fs::temp_directory_path() / ("comfy-config-test-" + std::to_string(::getpid()))) {
        fs::remove_all(path_);
        fs::create_directories(path_ / "sub");
        for (const char* pack : {"pack", "other", "other/pack"}) {
            fs::create_directories(path_ / pack);
            write(std::string(pack) + "/__init__.py", "NODE_CLASS_MAPPINGS = {}\n");
        }
        write("worker.sh", "#!/bin/sh\nexit 0\n");
        fs::permissions(path_ / "worker.sh", static_cast<fs::perms>(0755));
        write("not-executable.sh", "#!/bin/sh\nexit 0\n");
        fs::permissions(path_ / "not-executable.sh", static_cast<fs::perms>(0644));
        fs::create_symlink("worker.sh", path_ / "link.sh");
    }
    ~ConfigFolder() {
        std::error_code ignored;
        fs::remove_all(path_, ignored);
    }
    ConfigFolder(const ConfigFolder&) = delete;
    ConfigFolder& operator=(const ConfigFolder&) = delete;

    const fs::path& path() const { return path_; }

    // Writes `text` as config.json and returns the file's path.
    std::string config(const std::string& text) const { return write("config.json", text); }

    // Writes `text` as the file `name` in the folder and returns its path.
    std::string write(const std::string& name, const std::string& text) const {
        const fs::path file = path_ / name;
        std::ofstream(file) << text;
        return file.string();
    }

private:
    fs::path path_;
};

// environment_state(pack) as a user who cannot read what this one cannot: nobody (uid and
// gid 65534) in a child when the test runs as root, who reads everything; this process
// otherwise.
EnvironmentState state_as_unprivileged(const PackConfig& pack) {
    if (::geteuid() != 0) return environment_state(pack);
    int pipe_fds[2];
    REQUIRE(::pipe(pipe_fds) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::close(pipe_fds[0]);
        if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
            ::setresuid(65534, 65534, 65534) != 0) {
            ::_exit(2);
        }
        const auto state = environment_state(pack);
        const std::string text = std::to_string(static_cast<int>(state.fault)) + " " + state.line;
        const bool written = ::write(pipe_fds[1], text.data(), text.size()) == static_cast<ssize_t>(text.size());
        ::_exit(written ? 0 : 1);
    }
    ::close(pipe_fds[1]);
    std::string text;
    char buffer[512];
    for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(n));
    ::close(pipe_fds[0]);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    const auto space = text.find(' ');
    return {static_cast<EnvironmentFault>(std::stoi(text.substr(0, space))), text.substr(space + 1)};
}

// A config with one pack, `pack_fields` added to the pack and `top_fields` to the top.
std::string one_pack(const std::string& pack_fields = "", const std::string& top_fields = "") {
    return "{" + top_fields + (top_fields.empty() ? "" : ", ") + R"("packs": [{"name": "a", "command": "worker.sh")" +
           (pack_fields.empty() ? "" : ", ") + pack_fields + "}]}";
}

// A config with one pack in the python form, `python_fields` in its python section,
// `pack_fields` beside it, `top_fields` at the top.
std::string python_pack(const std::string& python_fields, const std::string& pack_fields = "",
                        const std::string& top_fields = "") {
    return "{" + top_fields + (top_fields.empty() ? "" : ", ") + R"("packs": [{"name": "a", "python": {)" +
           python_fields + "}" + (pack_fields.empty() ? "" : ", ") + pack_fields + "}]}";
}

// A "comfyui" section whose checkout is the folder "sub", for top_fields.
constexpr const char* kHostWithCheckout = R"("comfyui": {"command": "worker.sh", "checkout": "sub"})";

std::string with_device(const std::string& device) {
    return one_pack("", R"("device": )" + device);
}

std::string with_limits(const std::string& limits) {
    return one_pack("", R"("limits": )" + limits);
}

std::string with_restart(const std::string& restart) {
    return one_pack(R"("restart": )" + restart);
}

std::string load_error(const std::string& file) {
    try {
        load_config(file);
    } catch (const ConfigError& error) {
        return error.what();
    }
    FAIL("the config was accepted: " << file);
    return {};
}

}  // namespace

TEST_CASE("a config with every key lands in the struct field by field") {
    const ConfigFolder folder;
    const auto file = folder.config(R"({
        "device": {"kind": "cuda", "index": 1, "fallback": "simulated", "wait_ms": 0},
        "limits": {"heartbeat_timeout_ms": 2500, "handshake_timeout_ms": 20000, "host_handshake_timeout_ms": 1800000,
                   "ready_timeout_ms": 90000,
                   "shutdown_grace_ms": 0, "outstanding_requests": 3, "participants": 8, "ledger_entries": 128,
                   "ring_slots": 64},
        "packs": [
            {"name": "pack-a", "command": "worker.sh", "args": ["--pack", "pack a.json"],
             "env_allowlist": ["PATH", "HOME"], "env": {"MY_VAR": "1", "EMPTY": ""}, "working_directory": "sub",
             "restart": {"initial_backoff_ms": 0, "max_backoff_ms": 1000, "max_restarts": 0, "window_ms": 1}},
            {"name": "Pack_2", "command": "./sub/../worker.sh", "working_directory": "sub/"}
        ]
    })");

    const Config config = load_config(file);

    CHECK(config.source == file);
    CHECK(config.device.kind == DeviceKind::cuda);
    CHECK(config.device.cuda_index == 1);
    CHECK(config.device.cuda_fallback == CudaFallback::simulated);
    CHECK(config.device.wait == Milliseconds{0});
    CHECK(config.limits.heartbeat_timeout == Milliseconds{2500});
    CHECK(config.limits.handshake_timeout == Milliseconds{20000});
    CHECK(config.limits.host_handshake_timeout == Milliseconds{1800000});
    CHECK(config.limits.ready_timeout == Milliseconds{90000});
    CHECK(config.limits.shutdown_grace == Milliseconds{0});
    CHECK(config.limits.outstanding_requests == 3);
    CHECK(config.limits.capacities.participants == 8);
    CHECK(config.limits.capacities.ledger_entries == 128);
    CHECK(config.limits.capacities.ring_slots == 64);
    REQUIRE(config.packs.size() == 2);

    const PackConfig& a = config.packs[0];
    CHECK(a.name == "pack-a");
    CHECK(a.command == (folder.path() / "worker.sh").string());
    CHECK(a.args == std::vector<std::string>{"--pack", "pack a.json"});
    CHECK(a.env_allowlist == std::vector<std::string>{"PATH", "HOME"});
    CHECK(a.env == std::map<std::string, std::string>{{"EMPTY", ""}, {"MY_VAR", "1"}});
    CHECK(a.working_directory == (folder.path() / "sub").string());
    CHECK(a.restart.initial_backoff == Milliseconds{0});
    CHECK(a.restart.max_backoff == Milliseconds{1000});
    CHECK(a.restart.max_restarts == 0);
    CHECK(a.restart.window == Milliseconds{1});

    // Paths are normalized, and a trailing slash does not change the folder.
    const PackConfig& b = config.packs[1];
    CHECK(b.name == "Pack_2");
    CHECK(b.command == (folder.path() / "worker.sh").string());
    CHECK(b.working_directory == (folder.path() / "sub").string());
}

TEST_CASE("omitted keys take the defaults of config.hpp") {
    const ConfigFolder folder;
    const Config config = load_config(folder.config(one_pack()));

    // The machine's GPU, waited for a minute, never a simulated device without a word.
    const DeviceConfig device_defaults;
    CHECK(config.device.kind == DeviceKind::cuda);
    CHECK(config.device.total_bytes == device_defaults.total_bytes);
    CHECK(config.device.cuda_index == 0);
    CHECK(config.device.cuda_fallback == CudaFallback::stop);
    CHECK(config.device.wait == Milliseconds{60'000});

    const Limits limit_defaults;
    CHECK(config.limits.heartbeat_timeout == limit_defaults.heartbeat_timeout);
    CHECK(config.limits.handshake_timeout == limit_defaults.handshake_timeout);
    // ComfyUI's start takes minutes; a pack's worker says Hello before its import.
    CHECK(config.limits.host_handshake_timeout == Milliseconds{600'000});
    CHECK(config.limits.handshake_timeout == Milliseconds{10'000});
    CHECK(config.limits.ready_timeout == limit_defaults.ready_timeout);
    CHECK(config.limits.shutdown_grace == limit_defaults.shutdown_grace);
    CHECK(config.limits.outstanding_requests == limit_defaults.outstanding_requests);
    CHECK(config.limits.capacities.participants == limit_defaults.capacities.participants);
    CHECK(config.limits.capacities.ledger_entries == limit_defaults.capacities.ledger_entries);
    CHECK(config.limits.capacities.ring_slots == limit_defaults.capacities.ring_slots);

    REQUIRE(config.packs.size() == 1);
    const PackConfig& pack = config.packs[0];
    CHECK(pack.args.empty());
    CHECK(pack.env_allowlist.empty());
    CHECK(pack.env.empty());
    CHECK(pack.working_directory == folder.path().string());  // the config's folder
    const RestartPolicy restart_defaults;
    CHECK(pack.restart.initial_backoff == restart_defaults.initial_backoff);
    CHECK(pack.restart.max_backoff == restart_defaults.max_backoff);
    CHECK(pack.restart.max_restarts == restart_defaults.max_restarts);
    CHECK(pack.restart.window == restart_defaults.window);

    // Keys given in part leave the others at their defaults.
    const Config partial = load_config(folder.config(one_pack(R"("restart": {"max_restarts": 9})", R"("limits": {"ring_slots": 8})")));
    CHECK(partial.packs[0].restart.max_restarts == 9);
    CHECK(partial.packs[0].restart.window == restart_defaults.window);
    CHECK(partial.limits.capacities.ring_slots == 8);
    CHECK(partial.limits.capacities.participants == limit_defaults.capacities.participants);
}

TEST_CASE("the memory and host sections land in the struct, defaults where omitted") {
    const ConfigFolder folder;
    const Config config = load_config(folder.config(one_pack(
        "", R"("memory": {"reserve_bytes": "1GiB", "no_fit": "wait", "wait_timeout_ms": 1500, "answer_timeout_ms": 250,
                          "deaf_participant": "restart", "smart_memory": false, "ledger_quota": 100},
               "host": {"budget_bytes": "8GiB", "low_water_bytes": "1GiB", "pin_release_interval_ms": 100,
                        "idle_release_ms": 60000})")));
    CHECK(config.memory.reserve_bytes == std::uint64_t{1} << 30);
    CHECK(config.memory.no_fit == comfy::arbiter::NoFitPolicy::wait);
    CHECK(config.memory.wait_timeout == Milliseconds(1500));
    CHECK(config.memory.answer_timeout == Milliseconds(250));
    CHECK(config.memory.deaf_participant == DeafPolicy::restart);
    CHECK_FALSE(config.memory.smart_memory);
    CHECK(config.memory.ledger_quota == 100u);
    CHECK(ledger_quota_of(config) == 100);
    CHECK(config.host.budget_bytes == std::uint64_t{8} << 30);
    CHECK(config.host.low_water_bytes == std::uint64_t{1} << 30);
    CHECK(config.host.pin_release_interval == Milliseconds(100));
    CHECK(config.host.idle_release == Milliseconds(60000));

    const Config defaults = load_config(folder.config(one_pack()));
    const MemoryConfig memory_defaults;
    const HostMemoryConfig host_defaults;
    CHECK(defaults.memory.reserve_bytes == memory_defaults.reserve_bytes);
    CHECK(defaults.memory.no_fit == comfy::arbiter::NoFitPolicy::admit);
    CHECK(defaults.memory.deaf_participant == DeafPolicy::keep);
    CHECK(defaults.memory.smart_memory);
    CHECK_FALSE(defaults.memory.ledger_quota);
    CHECK(defaults.host.budget_bytes == host_defaults.budget_bytes);
    CHECK(defaults.host.idle_release == host_defaults.idle_release);
}

TEST_CASE("without memory.ledger_quota each participant's quota is its fair share of the ledger") {
    Config config;
    config.limits.capacities.ledger_entries = 4096;
    config.packs.resize(1);
    CHECK(ledger_quota_of(config) == 4096);  // alone, it may fill the ledger
    config.packs.resize(3);
    config.comfyui = PackConfig{};
    CHECK(ledger_quota_of(config) == 1024);  // three packs and the host
    config.packs.resize(63);
    CHECK(ledger_quota_of(config) == 64);
    config.limits.capacities.ledger_entries = 10;
    CHECK(ledger_quota_of(config) == 1);  // more participants than rows: one each still
    config.memory.ledger_quota = 7;
    CHECK(ledger_quota_of(config) == 7);
}

TEST_CASE("the comfyui section lands as the host's process, absent when not given") {
    const ConfigFolder folder;
    const Config config = load_config(folder.config(one_pack(
        "", R"("comfyui": {"command": "worker.sh", "args": ["main.py", "--listen"], "env_allowlist": ["PATH"],
                           "env": {"PYTHONUNBUFFERED": "1"}, "working_directory": "sub",
                           "restart": {"max_restarts": 2}})")));
    REQUIRE(config.comfyui.has_value());
    const PackConfig& host = *config.comfyui;
    CHECK(host.name == kHostParticipantName);
    CHECK(host.command == (folder.path() / "worker.sh").string());
    CHECK(host.args == std::vector<std::string>{"main.py", "--listen"});
    CHECK(host.env_allowlist == std::vector<std::string>{"PATH"});
    CHECK(host.env == std::map<std::string, std::string>{{"PYTHONUNBUFFERED", "1"}});
    CHECK(host.working_directory == (folder.path() / "sub").string());
    CHECK(host.restart.max_restarts == 2);
    CHECK(host.restart.window == RestartPolicy{}.window);
    // A pack may be called "host" when there is no host to confuse it with.
    CHECK_FALSE(load_config(folder.config(one_pack())).comfyui.has_value());
    CHECK(load_config(folder.config(R"({"packs": [{"name": "host", "command": "worker.sh"}]})")).packs[0].name == "host");
}

TEST_CASE("the host's limits on the packs' messages to the browser land in its config") {
    const ConfigFolder folder;
    const Config config = load_config(folder.config(one_pack(
        "", R"("comfyui": {"command": "worker.sh", "browser_messages": {"max_bytes": "256 KiB", "per_second": 20,
                                                                       "bytes_per_second": 1048576}})")));
    REQUIRE(config.comfyui);
    CHECK(config.comfyui->browser_messages.max_bytes == std::uint64_t{256} << 10);
    CHECK(config.comfyui->browser_messages.per_second == 20);
    CHECK(config.comfyui->browser_messages.bytes_per_second == std::uint64_t{1} << 20);
    // One key alone: the others keep their defaults.
    const Config rate_only = load_config(folder.config(
        one_pack("", R"("comfyui": {"command": "worker.sh", "browser_messages": {"per_second": 5}})")));
    CHECK(rate_only.comfyui->browser_messages.per_second == 5);
    CHECK(rate_only.comfyui->browser_messages.max_bytes == BrowserMessageLimits{}.max_bytes);
    CHECK(rate_only.comfyui->browser_messages.bytes_per_second == BrowserMessageLimits{}.bytes_per_second);
}

TEST_CASE("a pack in the python form runs pack_worker in its interpreter, the supervisor's package first on its path") {
    const ConfigFolder folder;
    const Config config = load_config(folder.config(R"({
        "comfyui": {"command": "worker.sh", "checkout": "sub/", "arena_bytes": "512 MiB"},
        "packs": [
            {"name": "a", "python": {"pack": "pack", "interpreter": "link.sh"}},
            {"name": "b", "python": {"pack": "./pack/", "interpreter": "worker.sh", "comfyui": ".",
                                     "comfyui_args": ["--cpu", "--lowvram"], "arena_bytes": 1048576,
                                     "cancel_grace_ms": 0},
             "env": {"PYTHONPATH": "/mine:/more", "OTHER": "1"}, "working_directory": "sub"},
            {"name": "c", "command": "worker.sh"}
        ]
    })"));
    const auto at = [&](const char* name) { return (folder.path() / name).lexically_normal().string(); };
    CHECK(config.comfyui_checkout == at("sub"));
    REQUIRE(config.comfyui);
    CHECK(config.comfyui->bridges);
    CHECK(config.comfyui->arena_bytes == std::uint64_t{512} << 20);
    CHECK_FALSE(config.comfyui->python);
    const BrowserMessageLimits defaults;
    CHECK(config.comfyui->browser_messages.max_bytes == defaults.max_bytes);
    CHECK(defaults.max_bytes == std::uint64_t{1} << 20);
    CHECK(defaults.per_second == 100);
    CHECK(defaults.bytes_per_second == std::uint64_t{16} << 20);

    const PackConfig& a = config.packs.at(0);
    REQUIRE(a.python);
    CHECK(a.python->folders == std::vector<std::string>{at("pack")});
    CHECK(a.python->interpreter == at("link.sh"));  // the link kept, as a venv's python needs
    CHECK(a.python->comfyui == at("sub"));           // the host's checkout
    CHECK(a.command == at("link.sh"));
    // Its name and the config's file, for the worker's messages (the command that rebuilds its environment).
    CHECK(a.args == std::vector<std::string>{"-m", "comfy_supervisor.pack_worker", "--pack", at("pack"), "--comfyui",
                                             at("sub"), "--name", "a", "--config", at("config.json")});
    CHECK(a.env == std::map<std::string, std::string>{{"PYTHONPATH", COMFY_SV_PYTHON_DIR}});
    CHECK(a.bridges);
    CHECK(a.arena_bytes == kDefaultArenaBytes);
    CHECK(kDefaultArenaBytes == std::uint64_t{2} << 30);
    CHECK(a.python->cancel_grace == std::chrono::milliseconds(3000));  // a few seconds after Cancel

    const PackConfig& b = config.packs.at(1);
    REQUIRE(b.python);
    CHECK(b.python->comfyui == folder.path().lexically_normal().string());  // "." is the config's folder
    CHECK(b.args.at(5) == b.python->comfyui);
    // ComfyUI's own flags follow "--", for the worker's comfy package.
    CHECK(b.python->comfyui_args == std::vector<std::string>{"--cpu", "--lowvram"});
    CHECK(std::vector<std::string>(b.args.begin() + 10, b.args.end()) ==
          std::vector<std::string>{"--", "--cpu", "--lowvram"});
    CHECK(b.env == std::map<std::string, std::string>{{"OTHER", "1"},
                                                      {"PYTHONPATH", std::string(COMFY_SV_PYTHON_DIR) + ":/mine:/more"}});
    CHECK(b.arena_bytes == std::uint64_t{1} << 20);
    CHECK(b.python->cancel_grace == std::chrono::milliseconds(0));  // ended at Cancel
    CHECK(b.working_directory == at("sub"));

    // A pack given by command does not bridge.
    const PackConfig& c = config.packs.at(2);
    CHECK_FALSE(c.python);
    CHECK_FALSE(c.bridges);
}

TEST_CASE("a group of packs is one entry whose pack lists their folders: one worker imports them in order") {
    const ConfigFolder folder;
    const Config config = load_config(folder.config(R"({
        "comfyui": {"command": "worker.sh", "checkout": "sub"},
        "packs": [{"name": "group", "python": {"pack": ["other", "pack/"], "interpreter": "worker.sh"}},
                  {"name": "alone", "python": {"pack": ["pack"], "interpreter": "worker.sh"}}]
    })"));
    const auto at = [&](const char* name) { return (folder.path() / name).lexically_normal().string(); };
    const PackConfig& group = config.packs.at(0);
    REQUIRE(group.python);
    CHECK(group.python->folders == std::vector<std::string>{at("other"), at("pack")});
    // --pack once a folder, in the config's order.
    CHECK(group.args == std::vector<std::string>{"-m", "comfy_supervisor.pack_worker", "--pack", at("other"), "--pack",
                                                 at("pack"), "--comfyui", at("sub"), "--name", "group", "--config",
                                                 at("config.json")});
    // A list of one is a pack alone.
    CHECK(config.packs.at(1).python->folders == std::vector<std::string>{at("pack")});
    CHECK(config.packs.at(1).args.at(3) == at("pack"));
}

TEST_CASE("a sandboxed Python pack's sandbox shows, read-only, what its worker needs where the sandbox hides it") {
    const ConfigFolder folder;
    // Under /tmp, which the sandbox hides whatever $TMPDIR says: a group of two packs, one
    // given by a link, a checkout, and a venv whose python is a link to an interpreter there.
    const fs::path hidden = fs::canonical("/tmp") / ("comfy-config-hidden-" + std::to_string(::getpid()));
    struct Removed {
        fs::path path;
        ~Removed() {
            std::error_code ignored;
            fs::remove_all(path, ignored);
        }
    } removed{hidden};
    for (const char* made : {"pack", "other", "checkout", "venv/bin", "stubs"}) fs::create_directories(hidden / made);
    for (const char* pack : {"pack", "other"}) {
        std::ofstream(hidden / pack / "__init__.py") << "NODE_CLASS_MAPPINGS = {}\n";
    }
    fs::create_directory_symlink(hidden / "pack", hidden / "linked");
    std::ofstream(hidden / "venv" / "pyvenv.cfg") << "include-system-site-packages = false\n";
    std::ofstream(hidden / "python.sh") << "#!/bin/sh\n";
    fs::permissions(hidden / "python.sh", static_cast<fs::perms>(0755));
    fs::create_symlink(hidden / "python.sh", hidden / "venv" / "bin" / "python");
    const auto at = [&](const char* name) { return (hidden / name).string(); };
    const nlohmann::json config = {
        {"comfyui", {{"command", "worker.sh"}, {"checkout", "sub"}}},
        {"packs", nlohmann::json::array({{{"name", "a"},
                                {"python", {{"pack", {at("linked"), at("other")}},
                                            {"interpreter", at("venv/bin/python")}, {"comfyui", at("checkout")}}},
                                {"working_directory", "sub"},
                                {"env", {{"PYTHONPATH", at("stubs") + ":relative:" + at("missing")}}},
                                {"sandbox", {{"readable", nlohmann::json::array({"sub"})}}}}})}};
    const Config loaded = load_config(folder.config(config.dump()));
    const SandboxConfig& sandbox = *loaded.packs.at(0).sandbox;
    const std::string sub = fs::canonical(folder.path() / "sub").string();
    // The config's own first; then each pack folder as the worker is given it and where its
    // link leads, the checkout, the venv, and the interpreter the venv's python links to.
    REQUIRE(sandbox.readable.size() >= 7);
    CHECK(std::vector<std::string>(sandbox.readable.begin(), sandbox.readable.begin() + 7) ==
          std::vector<std::string>{sub, at("linked"), at("pack"), at("other"), at("checkout"), at("venv"),
                                   at("python.sh")});
    // The supervisor's own package and library too, when they lie where the sandbox hides.
    std::vector<std::string> install;
    for (const std::string& part : {python_package_dir(), participant_library()}) {
        std::error_code error;
        install.insert(install.end(), {part, fs::canonical(part, error).string()});
    }
    // Last, the folders of the pack's own PYTHONPATH that exist (absolute ones).
    CHECK(sandbox.readable.back() == at("stubs"));
    for (auto shown = sandbox.readable.begin() + 7; shown != sandbox.readable.end() - 1; ++shown) {
        CHECK(std::find(install.begin(), install.end(), *shown) != install.end());
    }
    CHECK(sandbox.writable == std::vector<std::string>{sub});  // read-only, all of them
}

TEST_CASE("a Python pack's CUDA tensors go by IPC unless it is sandboxed or says no") {
    const ConfigFolder folder;
    const Config config = load_config(folder.config(R"({
        "comfyui": {"command": "worker.sh", "checkout": "."},
        "packs": [
            {"name": "plain", "python": {"pack": "pack", "interpreter": "worker.sh"}},
            {"name": "declines", "python": {"pack": "pack", "interpreter": "worker.sh", "cuda_ipc": false,
                                            "comfyui_args": ["--cpu"]}},
            {"name": "sandboxed", "python": {"pack": "pack", "interpreter": "worker.sh"}, "sandbox": {}},
            {"name": "trusted", "python": {"pack": "pack", "interpreter": "worker.sh", "cuda_ipc": true}, "sandbox": {}}
        ]
    })"));
    const auto declines = [](const PackConfig& pack) {
        return std::find(pack.args.begin(), pack.args.end(), "--no-cuda-ipc") != pack.args.end();
    };
    CHECK_FALSE(declines(config.packs.at(0)));
    CHECK(declines(config.packs.at(1)));
    // The flag is the pack worker's own, before ComfyUI's.
    CHECK(config.packs.at(1).args.at(10) == "--no-cuda-ipc");
    CHECK(config.packs.at(1).args.at(11) == "--");
    CHECK(declines(config.packs.at(2)));
    CHECK_FALSE(declines(config.packs.at(3)));
}

namespace {

// Sets PATH for one test, and puts it back.
class PathFor {
public:
    explicit PathFor(const std::string& path) : saved_(std::getenv("PATH") ? std::getenv("PATH") : "") {
        ::setenv("PATH", path.c_str(), 1);
    }
    ~PathFor() { ::setenv("PATH", saved_.c_str(), 1); }
    PathFor(const PathFor&) = delete;
    PathFor& operator=(const PathFor&) = delete;

private:
    std::string saved_;
};

}  // namespace

TEST_CASE("a Python pack's interpreter is by default the first python3 on the supervisor's PATH") {
    const ConfigFolder folder;
    fs::create_directories(folder.path() / "bin1");
    fs::create_directories(folder.path() / "bin2");
    folder.write("bin1/python3", "not executable\n");
    folder.write("bin2/python3", "#!/bin/sh\n");
    fs::permissions(folder.path() / "bin2/python3", static_cast<fs::perms>(0755));
    const std::string file = folder.config(python_pack(R"("pack": "pack")", "", kHostWithCheckout));
    {
        const PathFor path((folder.path() / "bin1").string() + "::" + (folder.path() / "bin2").string());
        CHECK(load_config(file).packs.at(0).command == (folder.path() / "bin2/python3").string());
    }
    {
        const PathFor path((folder.path() / "bin1").string());
        CHECK_THAT(load_error(file),
                   Contains(": at /packs/0/python/interpreter: expected a Python interpreter: there is no python3 on the "
                            "supervisor's PATH, so set /packs/0/python/interpreter, found nothing"));
    }
}

TEST_CASE("a Python pack's environment is not looked at when the config is read: its interpreter and the command "
          "that builds it are") {
    const ConfigFolder folder;
    const auto at = [&](const char* name) { return (folder.path() / name).lexically_normal().string(); };
    const std::string file =
        folder.config(python_pack(R"("pack": "pack", "environment": "envs/e1")", "", kHostWithCheckout));

    const PackConfig pack = load_config(file).packs.at(0);  // missing: its start says so, not the load
    REQUIRE(pack.python);
    CHECK(pack.python->environment == at("envs/e1"));
    CHECK(pack.python->interpreter == at("envs/e1/bin/python"));  // the venv's link kept
    CHECK(pack.command == at("envs/e1/bin/python"));
    CHECK(pack.python->build_command == "comfyctl pack add " + at("pack") + " --name a --config " + file);
}

TEST_CASE("an environment's diagnosis names the real cause: missing, unreadable by the user (the folder or the lock), "
          "unfinished, or without its interpreter, each with what to do") {
    const ConfigFolder folder;
    const auto at = [&](const char* name) { return (folder.path() / name).lexically_normal().string(); };
    const std::string file =
        folder.config(python_pack(R"("pack": "pack", "environment": "envs/e1")", "", kHostWithCheckout));
    const PackConfig pack = load_config(file).packs.at(0);
    const std::string env = at("envs/e1");
    const std::string build = "comfyctl pack add " + at("pack") + " --name a --config " + file;
    const std::string what = "pack a's environment " + env;

    auto state = environment_state(pack);
    CHECK(state.fault == EnvironmentFault::missing);
    CHECK(state.line == what + " is missing: run " + build + " to build it");

    fs::create_directories(folder.path() / "envs/e1/bin");
    state = environment_state(pack);
    CHECK(state.fault == EnvironmentFault::unfinished);
    CHECK(state.line == what + " is unfinished (no comfy-env.lock.json: comfyctl pack add did not end): run " + build +
                            " to rebuild it");

    const std::string lock = folder.write("envs/e1/comfy-env.lock.json", "{}");
    fs::create_symlink("/nonexistent/python3.11", folder.path() / "envs/e1/bin/python");
    state = environment_state(pack);
    CHECK(state.fault == EnvironmentFault::no_interpreter);
    CHECK(state.line == what + " has no interpreter (bin/python: No such file or directory, a link to "
                               "/nonexistent/python3.11): run " + build + " to rebuild it");
    fs::remove(folder.path() / "envs/e1/bin/python");
    fs::create_symlink(folder.path() / "worker.sh", folder.path() / "envs/e1/bin/python");
    CHECK(environment_state(pack).fault == EnvironmentFault::none);
    CHECK(environment_state(pack).line.empty());

    // Unreadable: as root, who reads everything, asked as nobody; as another user, as itself.
    const std::string user = ::geteuid() == 0 ? "nobody (uid 65534)" : this_user();
    const std::string owner = ::getpwuid(::geteuid())->pw_name;  // who made the folders
    const auto unreadable = [&](const std::string& path, const char* mode) {
        return what + " cannot be read by user " + user + ", as whom the supervisor runs (" + path + ", " + owner +
               "'s, mode " + mode + ": Permission denied): run " + build + " again as " + owner +
               ", which makes it readable to every user, or chmod -R a+rX " + env;
    };
    fs::permissions(lock, fs::perms::none);
    const auto [lock_fault, lock_line] = state_as_unprivileged(pack);
    CHECK(lock_fault == EnvironmentFault::unreadable);
    CHECK(lock_line == unreadable(lock, "0000"));
    // The folder of a root build (0700, root's); for a user's own folder, one it took its rights from.
    const bool root = ::geteuid() == 0;
    fs::permissions(env, root ? fs::perms::owner_all : fs::perms::none);
    const auto [folder_fault, folder_line] = state_as_unprivileged(pack);
    fs::permissions(env, fs::perms::owner_all);  // for the folder's removal
    CHECK(folder_fault == EnvironmentFault::unreadable);
    CHECK(folder_line == unreadable(env, root ? "0700" : "0000"));
}

TEST_CASE("the environments section lands as written, its paths from the config's folder") {
    const ConfigFolder folder;
    const Config config = load_config(folder.config(one_pack(
        "", R"("environments": {"root": "envs", "find_links": ["wheels", "/abs/w"],
                                "no_index": true})")));
    const auto at = [&](const char* name) { return (folder.path() / name).lexically_normal().string(); };
    CHECK(config.environments.root == at("envs"));
    CHECK(config.environments.find_links == std::vector<std::string>{at("wheels"), "/abs/w"});
    CHECK(config.environments.no_index);
    CHECK(config.environments.index_url.empty());
    const Config other =
        load_config(folder.config(one_pack("", R"("environments": {"index_url": "https://mirror.example/simple"})")));
    CHECK(other.environments.index_url == "https://mirror.example/simple");
    CHECK_FALSE(other.environments.no_index);
    CHECK(other.environments.root.empty());  // the tool's default
}

TEST_CASE("a simulated device's size takes binary units, with or without a space") {
    const ConfigFolder folder;
    const auto [written, bytes] = GENERATE(table<std::string, std::uint64_t>({
        {"268435456", std::uint64_t{256} << 20},
        {R"("262144KiB")", std::uint64_t{256} << 20},
        {R"("512MiB")", std::uint64_t{512} << 20},
        {R"("24GiB")", std::uint64_t{24} << 30},
        {R"("24 GiB")", std::uint64_t{24} << 30},
        {R"("2TiB")", std::uint64_t{2} << 40},
        {R"("1PiB")", std::uint64_t{1} << 50},
        {R"("1073741824B")", std::uint64_t{1} << 30},
    }));
    INFO("total_bytes: " << written);
    const Config config = load_config(folder.config(with_device(R"({"kind": "simulated", "total_bytes": )" + written + "}")));
    CHECK(config.device.kind == DeviceKind::simulated);
    CHECK(config.device.total_bytes == bytes);
}

TEST_CASE("a command is taken from the config's folder, absolute paths as they are, links kept") {
    const ConfigFolder folder;
    const fs::path dir = folder.path();
    const std::string absolute = (dir / "worker.sh").string();
    const auto [command, expected] = GENERATE_COPY(table<std::string, std::string>({
        {"worker.sh", absolute},  // no slash: still the config's folder, never PATH
        {"./worker.sh", absolute},
        {"sub/../worker.sh", absolute},
        {absolute, absolute},
        // A venv's python finds pyvenv.cfg through the link it was started by.
        {"link.sh", (dir / "link.sh").string()},
    }));
    INFO("command: " << command);
    const Config config =
        load_config(folder.config(R"({"packs": [{"name": "a", "command": )" + nlohmann::json(command).dump() + "}]}"));
    CHECK(config.packs[0].command == expected);
}

namespace {

struct BadConfig {
    const char* what;
    std::optional<std::string> text;  // nothing: no file is written
    std::string message_part;         // the path and the expectation, at least
};

// What each bad config's one-line message must contain.
std::vector<BadConfig> bad_configs() {
    const std::string long_name(32, 'x');
    return {
        {"no file", std::nullopt, ": cannot read: No such file or directory"},
        {"not JSON", R"({"packs": [)", ": not valid JSON: parse error at line 1, column 12"},
        {"empty file", "", ": not valid JSON: parse error at line 1, column 1"},
        {"a key twice", R"({"packs": [], "packs": []})", "at /packs: expected each key once in its object, found this key a second time"},
        {"a key twice deep down", one_pack(R"("restart": {"window_ms": 1, "window_ms": 2})"),
         "at /packs/0/restart/window_ms: expected each key once in its object"},
        {"a key twice after nested lists",
         R"({"packs": [{"name": "a", "command": "worker.sh", "args": ["x", ["y"], {"z": 1}]}, {"name": "b", "name": "c"}]})",
         "at /packs/1/name: expected each key once in its object"},
        {"top level not an object", "[]", "at /: expected an object, found []"},
        {"unknown top-level key", one_pack("", R"("colour": "red")"),
         "at /colour: expected one of the keys device, limits, memory, host, http, comfyui, packs, environments, found an unknown key"},
        {"http listen without a port", one_pack("", R"("http": {"listen": "127.0.0.1"})"),
         "at /http/listen: expected an address and port such as"},
        {"http listen on a host name", one_pack("", R"("http": {"listen": "localhost:8189"})"),
         "at /http/listen: expected an address and port such as"},
        {"http port out of range", one_pack("", R"("http": {"listen": "127.0.0.1:70000"})"),
         "at /http/listen: expected an address and port such as"},
        {"http beyond loopback without a token", one_pack("", R"("http": {"listen": "0.0.0.0:8189"})"),
         "at /http/listen: expected a loopback address such as \"127.0.0.1:8189\", or http.token_file beside it (the "
         "token every POST /free must then bear), found \"0.0.0.0:8189\" (reachable from other machines, with no token)"},
        {"http on every IPv6 address without a token", one_pack("", R"("http": {"listen": "[::]:8189"})"),
         "at /http/listen: expected a loopback address such as"},
        {"http on a LAN address without a token", one_pack("", R"("http": {"listen": "192.168.1.20:8189"})"),
         "at /http/listen: expected a loopback address such as"},
        {"http allowed_hosts not a list", one_pack("", R"("http": {"allowed_hosts": "gpu-box"})"),
         "at /http/allowed_hosts: expected a list of host names, found \"gpu-box\""},
        {"http allowed host with a port", one_pack("", R"("http": {"allowed_hosts": ["gpu-box", "gpu-box:8189"]})"),
         "at /http/allowed_hosts/1: expected a host name such as \"gpu-box.example.com\", without a port or scheme, "
         "found \"gpu-box:8189\""},
        {"http allowed host with a scheme", one_pack("", R"("http": {"allowed_hosts": ["http://gpu-box"]})"),
         "at /http/allowed_hosts/0: expected a host name such as"},
        {"http token file missing", one_pack("", R"("http": {"token_file": "no-token"})"),
         "at /http/token_file: expected a file holding the token, found \"no-token\" ("},
        {"http token file a folder", one_pack("", R"("http": {"token_file": "sub"})"),
         "at /http/token_file: expected a file holding the token, found \"sub\" ("},
        {"http token inline", one_pack("", R"("http": {"token": "0123456789abcdef"})"),
         "at /http/token: expected one of the keys listen, allowed_hosts, token_file, found an unknown key"},
        {"unknown no-fit policy", one_pack("", R"("memory": {"no_fit": "pray"})"),
         R"(at /memory/no_fit: expected "admit", "wait" or "refuse", found "pray")"},
        {"unknown memory key", one_pack("", R"("memory": {"reserve": 1})"),
         "at /memory/reserve: expected one of the keys reserve_bytes, no_fit, wait_timeout_ms, answer_timeout_ms, "
         "deaf_participant, smart_memory, ledger_quota"},
        {"unknown deaf-participant policy", one_pack("", R"("memory": {"deaf_participant": "kill"})"),
         R"(at /memory/deaf_participant: expected "keep" or "restart", found "kill")"},
        {"ledger quota of zero", one_pack("", R"("memory": {"ledger_quota": 0})"),
         "at /memory/ledger_quota: expected a whole number of models from 1 to 4096 (/limits/ledger_entries), found 0"},
        {"ledger quota past the ledger", one_pack("", R"("limits": {"ledger_entries": 128}, "memory": {"ledger_quota": 129})"),
         "at /memory/ledger_quota: expected a whole number of models from 1 to 128 (/limits/ledger_entries), found 129"},
        {"no outstanding requests", with_limits(R"({"outstanding_requests": 0})"),
         "at /limits/outstanding_requests: expected a whole number from 1 to 4096, found 0"},
        {"smart memory not a flag", one_pack("", R"("memory": {"smart_memory": "off"})"),
         R"(at /memory/smart_memory: expected true or false, found "off")"},
        {"host budget not a size", one_pack("", R"("host": {"budget_bytes": "lots"})"), "at /host/budget_bytes: expected a size"},
        {"answer time-out of zero", one_pack("", R"("memory": {"answer_timeout_ms": 0})"),
         "at /memory/answer_timeout_ms: expected"},
        {"comfyui section not an object", one_pack("", R"("comfyui": "main.py")"),
         "at /comfyui: expected an object, found \"main.py\""},
        {"comfyui section without a command", one_pack("", R"("comfyui": {"args": ["main.py"]})"),
         "at /comfyui/command: expected the path of an executable file (required), found nothing"},
        {"comfyui command not found", one_pack("", R"("comfyui": {"command": "venv/bin/python"})"),
         "at /comfyui/command: expected an executable file, found \"venv/bin/python\" ("},
        {"comfyui section with a name", one_pack("", R"("comfyui": {"name": "ui", "command": "worker.sh"})"),
         "at /comfyui/name: expected one of the keys command, args, env_allowlist, env, working_directory, restart, "
         "sandbox, checkout, arena_bytes, browser_messages, found an unknown key"},
        {"comfyui reserved env name", one_pack("", R"("comfyui": {"command": "worker.sh", "env": {"COMFY_SV_SLOT": "0"}})"),
         "at /comfyui/env/COMFY_SV_SLOT: expected a variable name not starting with COMFY_SV_"},
        {"comfyui restart out of range", one_pack("", R"("comfyui": {"command": "worker.sh", "restart": {"window_ms": 0}})"),
         "at /comfyui/restart/window_ms: expected a whole number of milliseconds from 1 to 86400000, found 0"},
        {"a pack named host beside the host",
         R"({"comfyui": {"command": "worker.sh"}, "packs": [{"name": "host", "command": "worker.sh"}]})",
         "at /packs/0/name: expected a name other than \"host\" (the ComfyUI host's, from /comfyui), found \"host\""},
        {"unknown pack key", one_pack(R"("colour": "red")"),
         "at /packs/0/colour: expected one of the keys name, command, python, args, env_allowlist, env, working_directory, "
         "restart, sandbox, found an unknown key"},
        {"unknown restart key", with_restart(R"({"retries": 3})"),
         "at /packs/0/restart/retries: expected one of the keys initial_backoff_ms, max_backoff_ms, max_restarts, window_ms"},
        {"unknown limits key", with_limits(R"({"heartbeat_ms": 3})"), "at /limits/heartbeat_ms: expected one of the keys"},
        {"cuda key on a simulated device", with_device(R"({"kind": "simulated", "index": 0})"),
         "at /device/index: expected one of the keys kind, total_bytes (for a \"simulated\" device)"},
        {"simulated key on a cuda device", with_device(R"({"kind": "cuda", "total_bytes": "24GiB"})"),
         "at /device/total_bytes: expected one of the keys kind, index, fallback, wait_ms (for a \"cuda\" device)"},
        {"simulated key without a kind", with_device(R"({"total_bytes": "24GiB"})"),
         "at /device/total_bytes: expected one of the keys kind, index, fallback, wait_ms (for a \"cuda\" device, the "
         "default; add \"kind\": \"simulated\" for a simulated one), found an unknown key"},
        {"wait too long", with_device(R"({"wait_ms": 3600001})"),
         "at /device/wait_ms: expected a whole number of milliseconds from 0 to 3600000, found 3600001"},
        {"device not an object", with_device(R"("cuda")"), "at /device: expected an object, found \"cuda\""},
        {"unknown device kind", with_device(R"({"kind": "tpu"})"),
         "at /device/kind: expected \"simulated\" or \"cuda\", found \"tpu\""},
        {"unknown fallback", with_device(R"({"kind": "cuda", "fallback": "cpu"})"),
         "at /device/fallback: expected \"simulated\" or \"stop\", found \"cpu\""},
        {"cuda index too large", with_device(R"({"kind": "cuda", "index": 64})"),
         "at /device/index: expected a whole number from 0 to 63, found 64"},
        {"size too small", with_device(R"({"kind": "simulated", "total_bytes": "255MiB"})"),
         "at /device/total_bytes: expected a size from 256MiB to 1PiB: a whole number of bytes or a string like \"24GiB\" "
         "(units B, KiB, MiB, GiB, TiB, PiB), found \"255MiB\""},
        {"size too large", with_device(R"({"kind": "simulated", "total_bytes": "1025TiB"})"),
         "at /device/total_bytes: expected a size from 256MiB to 1PiB"},
        {"size beyond 64 bits", with_device(R"({"kind": "simulated", "total_bytes": "99999999999999999999GiB"})"),
         "at /device/total_bytes: expected a size from 256MiB to 1PiB"},
        {"decimal unit", with_device(R"({"kind": "simulated", "total_bytes": "24GB"})"),
         "at /device/total_bytes: expected a size"},
        {"lower-case unit", with_device(R"({"kind": "simulated", "total_bytes": "24gib"})"),
         "at /device/total_bytes: expected a size"},
        {"fractional size", with_device(R"({"kind": "simulated", "total_bytes": "1.5GiB"})"),
         "at /device/total_bytes: expected a size"},
        {"size without a unit", with_device(R"({"kind": "simulated", "total_bytes": "1073741824"})"),
         "at /device/total_bytes: expected a size"},
        {"negative size", with_device(R"({"kind": "simulated", "total_bytes": -1})"),
         "at /device/total_bytes: expected a size"},
        {"duration as a string", with_limits(R"({"heartbeat_timeout_ms": "5000"})"),
         "at /limits/heartbeat_timeout_ms: expected a whole number of milliseconds from 100 to 3600000, found \"5000\""},
        {"duration with a fraction", with_limits(R"({"heartbeat_timeout_ms": 5000.5})"),
         "at /limits/heartbeat_timeout_ms: expected a whole number of milliseconds from 100 to 3600000, found 5000.5"},
        {"heartbeat too short", with_limits(R"({"heartbeat_timeout_ms": 99})"),
         "at /limits/heartbeat_timeout_ms: expected a whole number of milliseconds from 100 to 3600000, found 99"},
        {"handshake too long", with_limits(R"({"handshake_timeout_ms": 600001})"),
         "at /limits/handshake_timeout_ms: expected a whole number of milliseconds from 100 to 600000, found 600001"},
        {"host handshake too long", with_limits(R"({"host_handshake_timeout_ms": 3600001})"),
         "at /limits/host_handshake_timeout_ms: expected a whole number of milliseconds from 100 to 3600000, "
         "found 3600001"},
        {"ready too long", with_limits(R"({"ready_timeout_ms": 3600001})"),
         "at /limits/ready_timeout_ms: expected a whole number of milliseconds from 100 to 3600000, found 3600001"},
        {"grace beyond a Shutdown message", with_limits(R"({"shutdown_grace_ms": 600001})"),
         "at /limits/shutdown_grace_ms: expected a whole number of milliseconds from 0 to 600000, found 600001"},
        {"negative grace", with_limits(R"({"shutdown_grace_ms": -1})"), "at /limits/shutdown_grace_ms: expected"},
        {"ring_slots not a power of two", with_limits(R"({"ring_slots": 3})"),
         "at /limits/ring_slots: expected a value the shared segment accepts (ring_slots is 3, expected a power of two"},
        {"no participants", with_limits(R"({"participants": 0})"),
         "at /limits/participants: expected a value the shared segment accepts (participants is 0"},
        {"ledger beyond 32 bits", with_limits(R"({"ledger_entries": 4294967296})"),
         "at /limits/ledger_entries: expected a whole number from 0 to 4294967295, found 4294967296"},
        {"more packs than participants allow", one_pack("", R"("limits": {"participants": 1})"),
         "at /packs: expected at most 0 packs (/limits/participants is 1, one of them the ComfyUI host), found 1 pack"},
        {"max_backoff below initial", with_restart(R"({"initial_backoff_ms": 500, "max_backoff_ms": 400})"),
         "at /packs/0/restart/max_backoff_ms: expected at least initial_backoff_ms (500), found 400"},
        {"initial above the default max", with_restart(R"({"initial_backoff_ms": 40000})"),
         "at /packs/0/restart/max_backoff_ms: expected at least initial_backoff_ms (40000), found 30000 (the default)"},
        {"too many restarts", with_restart(R"({"max_restarts": 1001})"),
         "at /packs/0/restart/max_restarts: expected a whole number from 0 to 1000, found 1001"},
        {"empty restart window", with_restart(R"({"window_ms": 0})"),
         "at /packs/0/restart/window_ms: expected a whole number of milliseconds from 1 to 86400000, found 0"},
        {"no packs key", R"({"limits": {}})", "at /packs: expected a list of packs (required), found nothing"},
        {"packs not a list", R"({"packs": {"name": "a"}})", "at /packs: expected a list of packs, found {\"name\":\"a\"}"},
        {"empty packs", R"({"packs": []})", "at /packs: expected at least one pack, or a comfyui section, found []"},
        {"pack not an object", R"({"packs": ["a"]})", "at /packs/0: expected an object, found \"a\""},
        {"missing name", R"({"packs": [{"command": "worker.sh"}]})",
         "at /packs/0/name: expected a pack name of 1 to 31 characters from [A-Za-z0-9_-] (required), found nothing"},
        {"missing command", R"({"packs": [{"name": "a"}]})",
         "at /packs/0/command: expected the path of an executable file, or a python section (required), found nothing"},
        {"host without a command", one_pack("", R"("comfyui": {"checkout": "sub"})"),
         "at /comfyui/command: expected the path of an executable file (required), found nothing"},
        {"both command and python", one_pack(R"("python": {"pack": "pack", "interpreter": "worker.sh"})", kHostWithCheckout),
         "at /packs/0: expected exactly one of command and python, found both"},
        {"args beside python", python_pack(R"("pack": "pack", "interpreter": "worker.sh")", R"("args": ["-v"])", kHostWithCheckout),
         "at /packs/0/args: expected no args beside python (the supervisor makes a Python pack's command line), found [\"-v\"]"},
        {"python not an object", R"({"packs": [{"name": "a", "python": "pack"}]})",
         "at /packs/0/python: expected an object, found \"pack\""},
        {"unknown python key", python_pack(R"("pack": "pack", "venv": "x")", "", kHostWithCheckout),
         "at /packs/0/python/venv: expected one of the keys pack, interpreter, environment, comfyui, comfyui_args, "
         "arena_bytes, cuda_ipc, cancel_grace_ms, warm_template, found an unknown key"},
        {"python with both an interpreter and an environment",
         python_pack(R"("pack": "pack", "interpreter": "worker.sh", "environment": "sub")", "", kHostWithCheckout),
         "at /packs/0/python/environment: expected one of interpreter and environment (the environment's is "
         "bin/python), found both"},
        {"environments not an object", one_pack("", R"("environments": "envs")"),
         "at /environments: expected an object, found \"envs\""},
        {"unknown environments key", one_pack("", R"("environments": {"find-links": []})"),
         "at /environments/find-links: expected one of the keys root, find_links, no_index, index_url, found an "
         "unknown key"},
        {"environments find_links a string", one_pack("", R"("environments": {"find_links": "wheels"})"),
         "at /environments/find_links: expected a list of folders, found \"wheels\""},
        {"environments find_links empty", one_pack("", R"("environments": {"find_links": [""]})"),
         "at /environments/find_links/0: expected a folder of wheels, found \"\""},
        {"environments index_url not a URL", one_pack("", R"("environments": {"index_url": "pypi.org/simple"})"),
         "at /environments/index_url: expected a package index's http://, https:// or file:// URL, as pip's "
         "--index-url, found \"pypi.org/simple\""},
        {"environments index_url beside no_index",
         one_pack("", R"("environments": {"no_index": true, "index_url": "https://pypi.org/simple"})"),
         "at /environments/index_url: expected no index_url beside \"no_index\": true (pip would use neither)"},
        {"environments no_index not a flag", one_pack("", R"("environments": {"no_index": "yes"})"),
         "at /environments/no_index: expected true or false, found \"yes\""},
        {"python without its pack", python_pack(R"("interpreter": "worker.sh")", "", kHostWithCheckout),
         "at /packs/0/python/pack: expected a custom node pack's folder (a directory with __init__.py), or a list of "
         "them (a group, run in one worker) (required), found nothing"},
        {"python pack a number", python_pack(R"("pack": 5, "interpreter": "worker.sh")", "", kHostWithCheckout),
         "at /packs/0/python/pack: expected a custom node pack's folder (a directory with __init__.py), or a list of "
         "them (a group, run in one worker), found 5"},
        {"a group of no folders", python_pack(R"("pack": [], "interpreter": "worker.sh")", "", kHostWithCheckout),
         "at /packs/0/python/pack: expected a custom node pack's folder (a directory with __init__.py), or a list of "
         "them (a group, run in one worker), found []"},
        {"a group with a folder twice",
         python_pack(R"("pack": ["pack", "other", "./pack/"], "interpreter": "worker.sh")", "", kHostWithCheckout),
         "at /packs/0/python/pack/2: expected each folder once, found \"./pack/\" (also /packs/0/python/pack/0)"},
        {"a group with two folders of one name",
         python_pack(R"("pack": ["pack", "other/pack"], "interpreter": "worker.sh")", "", kHostWithCheckout),
         "at /packs/0/python/pack/1: expected a folder whose name no other folder of the group has (ComfyUI imports a "
         "pack as the module of its folder's name), found \"other/pack\" (the name of /packs/0/python/pack/0 too)"},
        {"a group with a folder that is not a pack",
         python_pack(R"("pack": ["pack", "sub"], "interpreter": "worker.sh")", "", kHostWithCheckout),
         "at /packs/0/python/pack/1: expected a custom node pack's folder (a directory with __init__.py), found "
         "\"sub\" ("},
        {"a group with a folder that is not a string",
         python_pack(R"("pack": ["pack", ["other"]], "interpreter": "worker.sh")", "", kHostWithCheckout),
         "at /packs/0/python/pack/1: expected a custom node pack's folder (a directory with __init__.py), found "
         "[\"other\"]"},
        {"python pack without __init__.py", python_pack(R"("pack": "sub", "interpreter": "worker.sh")", "", kHostWithCheckout),
         "at /packs/0/python/pack: expected a custom node pack's folder (a directory with __init__.py), found \"sub\" ("},
        {"python pack a file", python_pack(R"("pack": "worker.sh", "interpreter": "worker.sh")", "", kHostWithCheckout),
         "/worker.sh: not a directory)"},
        {"python pack missing", python_pack(R"("pack": "nowhere", "interpreter": "worker.sh")", "", kHostWithCheckout),
         "/nowhere: No such file or directory)"},
        {"python interpreter not executable",
         python_pack(R"("pack": "pack", "interpreter": "not-executable.sh")", "", kHostWithCheckout),
         "at /packs/0/python/interpreter: expected an executable file, found \"not-executable.sh\" ("},
        {"no ComfyUI checkout", python_pack(R"("pack": "pack", "interpreter": "worker.sh")"),
         "at /packs/0/python: expected a ComfyUI checkout: set /comfyui/checkout or /packs/0/python/comfyui, found nothing"},
        {"a host without a checkout", python_pack(R"("pack": "pack", "interpreter": "worker.sh")", "",
                                                  R"("comfyui": {"command": "worker.sh"})"),
         "at /packs/0/python: expected a ComfyUI checkout: set /comfyui/checkout or /packs/0/python/comfyui"},
        {"python comfyui not a folder",
         python_pack(R"("pack": "pack", "interpreter": "worker.sh", "comfyui": "worker.sh")", "", kHostWithCheckout),
         "at /packs/0/python/comfyui: expected a directory, found \"worker.sh\" ("},
        {"checkout missing", one_pack("", R"("comfyui": {"command": "worker.sh", "checkout": "nowhere"})"),
         "at /comfyui/checkout: expected a directory, found \"nowhere\" ("},
        {"arena below a MiB", python_pack(R"("pack": "pack", "interpreter": "worker.sh", "arena_bytes": "512 KiB")", "",
                                          kHostWithCheckout),
         "at /packs/0/python/arena_bytes: expected a size from 1MiB to 1TiB: a whole number of bytes or a string like"},
        {"arena above a TiB", python_pack(R"("pack": "pack", "interpreter": "worker.sh", "arena_bytes": 1099511627777)", "",
                                          kHostWithCheckout),
         "at /packs/0/python/arena_bytes: expected a size from 1MiB to 1TiB"},
        {"host arena not a size", one_pack("", R"("comfyui": {"command": "worker.sh", "arena_bytes": "2GB"})"),
         "at /comfyui/arena_bytes: expected a size from 1MiB to 1TiB"},
        {"browser messages not an object", one_pack("", R"("comfyui": {"command": "worker.sh", "browser_messages": 100})"),
         "at /comfyui/browser_messages: expected an object, found 100"},
        {"browser messages with an unknown key",
         one_pack("", R"("comfyui": {"command": "worker.sh", "browser_messages": {"per_minute": 100}})"),
         "at /comfyui/browser_messages/per_minute: expected one of the keys max_bytes, per_second, bytes_per_second, "
         "found an unknown key"},
        {"a browser message past a frame",
         one_pack("", R"("comfyui": {"command": "worker.sh", "browser_messages": {"max_bytes": "65 MiB"}})"),
         "at /comfyui/browser_messages/max_bytes: expected a size from 1KiB to 64MiB"},
        {"no browser messages a second",
         one_pack("", R"("comfyui": {"command": "worker.sh", "browser_messages": {"per_second": 0}})"),
         "at /comfyui/browser_messages/per_second: expected a whole number from 1 to 1000000, found 0"},
        {"browser bytes a second below one message",
         one_pack("", R"("comfyui": {"command": "worker.sh",
                                     "browser_messages": {"max_bytes": "4 MiB", "bytes_per_second": "2 MiB"}})"),
         "at /comfyui/browser_messages/bytes_per_second: expected bytes_per_second of at least max_bytes (4MiB): a "
         "message larger than a second's bytes could never be sent, found 2MiB"},
        {"browser message above the default bytes a second",
         one_pack("", R"("comfyui": {"command": "worker.sh", "browser_messages": {"max_bytes": "32 MiB"}})"),
         "at /comfyui/browser_messages/bytes_per_second: expected bytes_per_second of at least max_bytes (32MiB)"},
        {"cancel grace beyond an hour",
         python_pack(R"("pack": "pack", "interpreter": "worker.sh", "cancel_grace_ms": 3600001)", "", kHostWithCheckout),
         "at /packs/0/python/cancel_grace_ms: expected a whole number of milliseconds from 0 to 3600000, found 3600001"},
        {"cancel grace negative",
         python_pack(R"("pack": "pack", "interpreter": "worker.sh", "cancel_grace_ms": -1)", "", kHostWithCheckout),
         "at /packs/0/python/cancel_grace_ms: expected a whole number of milliseconds from 0 to 3600000, found -1"},
        {"PYTHONPATH passed through to a Python pack",
         python_pack(R"("pack": "pack", "interpreter": "worker.sh")", R"("env_allowlist": ["HOME", "PYTHONPATH"])",
                     kHostWithCheckout),
         "at /packs/0/env_allowlist/1: expected a variable other than PYTHONPATH in a Python pack (the supervisor sets "
         "it; give yours in env, which it joins after its own), found \"PYTHONPATH\""},
        {"duplicate pack names",
         R"({"packs": [{"name": "a", "command": "worker.sh"}, {"name": "b", "command": "worker.sh"},
                       {"name": "a", "command": "worker.sh"}]})",
         "at /packs/2/name: expected a name no other pack has, found \"a\" (also the name of /packs/0)"},
        {"name with a space", R"({"packs": [{"name": "a b", "command": "worker.sh"}]})",
         "at /packs/0/name: expected a pack name of 1 to 31 characters from [A-Za-z0-9_-], found \"a b\""},
        {"name too long", R"({"packs": [{"name": ")" + long_name + R"(", "command": "worker.sh"}]})",
         "at /packs/0/name: expected a pack name of 1 to 31 characters"},
        {"empty name", R"({"packs": [{"name": "", "command": "worker.sh"}]})", "at /packs/0/name: expected a pack name"},
        {"name not a string", R"({"packs": [{"name": 7, "command": "worker.sh"}]})", "at /packs/0/name: expected a pack name"},
        {"empty command", R"({"packs": [{"name": "a", "command": ""}]})",
         "at /packs/0/command: expected the path of an executable file, found \"\""},
        {"command not found", R"({"packs": [{"name": "a", "command": "bin/missing"}]})",
         "at /packs/0/command: expected an executable file, found \"bin/missing\" ("},
        {"command not executable", R"({"packs": [{"name": "a", "command": "not-executable.sh"}]})",
         "/not-executable.sh: Permission denied)"},
        {"command is a directory", R"({"packs": [{"name": "a", "command": "sub"}]})", "/sub: not a regular file)"},
        {"command with a NUL", R"({"packs": [{"name": "a", "command": "worker.sh\u0000x"}]})",
         "at /packs/0/command: expected the path of an executable file without NUL characters"},
        {"working directory missing", one_pack(R"("working_directory": "nowhere")"),
         "at /packs/0/working_directory: expected a directory, found \"nowhere\" ("},
        {"working directory a file", one_pack(R"("working_directory": "worker.sh")"), "/worker.sh: not a directory)"},
        {"args not a list", one_pack(R"("args": "--fast")"), "at /packs/0/args: expected a list of strings, found \"--fast\""},
        {"arg not a string", one_pack(R"("args": ["--port", 8188])"), "at /packs/0/args/1: expected a string, found 8188"},
        {"bad allowlisted name", one_pack(R"("env_allowlist": ["PATH", "1X"])"),
         "at /packs/0/env_allowlist/1: expected a variable name of [A-Za-z_][A-Za-z0-9_]*, found \"1X\""},
        {"reserved allowlisted name", one_pack(R"("env_allowlist": ["COMFY_SV_TOKEN"])"),
         "at /packs/0/env_allowlist/0: expected a variable name not starting with COMFY_SV_ (reserved for the supervisor), "
         "found \"COMFY_SV_TOKEN\""},
        {"bad env name", one_pack(R"("env": {"A-B": "1"})"),
         "at /packs/0/env/A-B: expected a variable name of [A-Za-z_][A-Za-z0-9_]*, found \"A-B\""},
        {"reserved env name", one_pack(R"("env": {"COMFY_SV_SLOT": "1"})"),
         "at /packs/0/env/COMFY_SV_SLOT: expected a variable name not starting with COMFY_SV_"},
        {"env value not a string", one_pack(R"("env": {"N": 1})"), "at /packs/0/env/N: expected a string, found 1"},
        {"env both passed and set", one_pack(R"("env_allowlist": ["HOME"], "env": {"HOME": "/tmp"})"),
         "at /packs/0/env/HOME: expected a variable not also in env_allowlist, found \"HOME\""},
        {"sandbox not an object", one_pack(R"("sandbox": true)"), "at /packs/0/sandbox: expected an object, found true"},
        {"unknown sandbox key", one_pack(R"("sandbox": {"net": false})"),
         "at /packs/0/sandbox/net: expected one of the keys writable, readable, network, found an unknown key"},
        {"sandbox writable not a list", one_pack(R"("sandbox": {"writable": "sub"})"),
         "at /packs/0/sandbox/writable: expected a list of paths, found \"sub\""},
        {"sandbox writable missing", one_pack(R"("sandbox": {"writable": ["sub", "nowhere"]})"),
         "at /packs/0/sandbox/writable/1: expected an existing file or folder, found \"nowhere\" ("},
        {"sandbox readable empty", one_pack(R"("sandbox": {"readable": [""]})"),
         "at /packs/0/sandbox/readable/0: expected the path of a file or folder, found \"\""},
        {"sandbox network not a flag", one_pack(R"("sandbox": {"network": "no"})"),
         "at /packs/0/sandbox/network: expected true or false, found \"no\""},
        {"a sandbox writable over its own /dev", one_pack(R"("sandbox": {"writable": ["sub", "/dev"]})"),
         "at /packs/0/sandbox/writable/1: expected a folder that does not hold /dev (bound writable over the "
         "sandbox's own, it would leave the worker no device it can open), found \"/dev\" (a writable folder)"},
        {"a sandbox's working directory over its own /dev", one_pack(R"("working_directory": "/", "sandbox": {})"),
         "at /packs/0/sandbox: expected a folder that does not hold /dev (bound writable over the sandbox's own, it "
         "would leave the worker no device it can open), found \"/\" (the working directory, bound writable)"},
        {"a sandboxed Python pack's checkout is /tmp",
         python_pack(R"("pack": "pack", "interpreter": "worker.sh", "comfyui": "/tmp")", R"("sandbox": {})"),
         "at /packs/0/python/comfyui: expected a folder a sandbox can show by itself: not /tmp, /run, /dev, /proc or "
         "a folder holding one, nor one inside /proc, found \"/tmp\" (the ComfyUI checkout, which a sandboxed Python "
         "pack needs shown: move it into a folder of its own, or remove the pack's \"sandbox\")"},
        {"a sandboxed Python pack's environment is /tmp",
         python_pack(R"("pack": "pack", "environment": "/tmp")", R"("sandbox": {})", kHostWithCheckout),
         "at /packs/0/python/environment: expected a folder a sandbox can show by itself: not /tmp, /run, /dev, "
         "/proc or a folder holding one, nor one inside /proc, found \"/tmp\" (the pack's environment, which a "
         "sandboxed Python pack needs shown: move it into a folder of its own, or remove the pack's \"sandbox\")"},
        {"a sandboxed Python pack's checkout holds /run",
         python_pack(R"("pack": "pack", "interpreter": "worker.sh")", R"("sandbox": {})",
                     R"("comfyui": {"command": "worker.sh", "checkout": "/"})"),
         "at /comfyui/checkout: expected a folder a sandbox can show by itself: not /tmp, /run, /dev, /proc or a "
         "folder holding one, nor one inside /proc, found \"/\" (the ComfyUI checkout, "},
        {"key with a slash and a newline", one_pack("", R"("a/b\nc": 1)"),
         "at /a~1b\\x0ac: expected one of the keys device, limits, memory, host, http, comfyui, packs, environments"},
        {"long value cut short", with_device(R"({"kind": ")" + std::string(100, 'k') + R"("})"),
         "found \"" + std::string(56, 'k') + "..."},
    };
}

}  // namespace

TEST_CASE("a bad config is refused with one line: file, JSON path, expectation, finding") {
    const ConfigFolder folder;
    const BadConfig row = GENERATE(from_range(bad_configs()));
    INFO(row.what);
    const std::string file = row.text ? folder.config(*row.text) : (folder.path() / "missing.json").string();

    const std::string message = load_error(file);

    CHECK_THAT(message, StartsWith(file + ": "));
    CHECK(message.find('\n') == std::string::npos);
    CHECK_THAT(message, Contains(row.message_part));
}

TEST_CASE("the http section: its address, allowed names in lower case, and the token from a file of its own") {
    const ConfigFolder folder;
    const std::string token = "0123456789abcdef0123456789abcdef";
    const auto token_file = folder.write("http-token", token + "\n");
    fs::permissions(token_file, static_cast<fs::perms>(0600));
    const auto exposed = load_config(folder.config(
        one_pack("", R"("http": {"listen": "0.0.0.0:8189", "allowed_hosts": ["GPU-Box.example.com"], "token_file": "http-token"})")));
    CHECK(exposed.http.enabled);
    CHECK(exposed.http.address == "0.0.0.0");
    CHECK(exposed.http.port == 8189);
    CHECK(exposed.http.allowed_hosts == std::vector<std::string>{"gpu-box.example.com"});
    CHECK(exposed.http.token == token);
    // On loopback the token is optional; 127.0.0.0/8 and ::1 are loopback.
    for (const auto* listen : {"127.0.0.1:8189", "127.1.2.3:0", "[::1]:8189", "[::ffff:127.0.0.1]:8189"}) {
        INFO(listen);
        const auto local = load_config(folder.config(one_pack("", R"("http": {"listen": ")" + std::string(listen) + "\"}")));
        CHECK(local.http.enabled);
        CHECK(local.http.token.empty());
    }
    // Group may read it (a Kubernetes Secret with fsGroup), not write it; others nothing.
    fs::permissions(token_file, static_cast<fs::perms>(0640));
    CHECK(load_config(folder.config(one_pack("", R"("http": {"token_file": "http-token"})"))).http.token == token);
}

TEST_CASE("a token file others can read, or that is not a token, is refused without showing it") {
    const ConfigFolder folder;
    const auto config = folder.config(one_pack("", R"("http": {"listen": "0.0.0.0:8189", "token_file": "t"})"));
    const auto token_file = folder.path() / "t";
    const auto put = [&](const std::string& text, unsigned mode) {
        folder.write("t", text);
        fs::permissions(token_file, static_cast<fs::perms>(mode));
    };
    const auto with = [&](const std::string& text, unsigned mode) {
        put(text, mode);
        return load_error(config);
    };
    const std::string secret = "0123456789abcdef0123456789abcdef";
    const auto readable = with(secret, 0644);
    CHECK_THAT(readable, Contains("at /http/token_file: expected a file other users cannot read or write (chmod 600 " +
                                  token_file.string() + "), found \"t\" (mode 0644)"));
    CHECK_THAT(with(secret, 0620), Contains("found \"t\" (mode 0620)"));
    const auto short_token = with("short\n", 0600);
    CHECK_THAT(short_token, Contains("at /http/token_file: expected a file holding one line of 16 to 1024 visible ASCII "
                                     "characters, no spaces (e.g. openssl rand -hex 32 > " +
                                     token_file.string() + "), found \"t\" (5 characters)"));
    CHECK_THAT(with("two words and more than sixteen\n", 0600), Contains("not all of them visible"));
    CHECK_THAT(with(secret + "\n" + secret + "\n", 0600), Contains("not all of them visible"));
    CHECK_THAT(with("", 0600), Contains("(0 characters)"));
    CHECK_THAT(with(std::string(2000, 'x'), 0600), Contains("expected a file holding the token"));
    for (const auto& message : {readable, short_token}) {
        CHECK(message.find('\n') == std::string::npos);
        CHECK(message.find("0123456789abcdef") == std::string::npos);
    }
    // Another user could choose the token of a file of theirs.
    put(secret, 0600);
    if (::geteuid() != 0) {
        WARN("not root: no file of another user can be made, so its refusal is not tried");
    } else {
        REQUIRE(::chown(token_file.c_str(), 65534, 65534) == 0);
        CHECK_THAT(load_error(config), Contains("at /http/token_file: expected a file of the supervisor's user (uid 0) or "
                                                "root, found \"t\" (owned by uid 65534)"));
    }
}

TEST_CASE("a pack's sandbox: its folder and the declared ones writable, links resolved, no network by default") {
    const ConfigFolder folder;
    fs::create_directory(folder.path() / "real");
    fs::create_symlink("real", folder.path() / "link");
    const auto file = folder.config(one_pack(
        R"("working_directory": "link", "sandbox": {"writable": ["sub", "/tmp"], "readable": ["worker.sh"]})"));
    const Config config = load_config(file);
    REQUIRE(config.packs[0].sandbox);
    const SandboxConfig& sandbox = *config.packs[0].sandbox;
    const auto real = fs::canonical(folder.path());
    // The working directory keeps its link (the worker is started there); its bind does not.
    CHECK(config.packs[0].working_directory == (folder.path() / "link").string());
    CHECK(sandbox.writable == std::vector<std::string>{(real / "real").string(), (real / "sub").string(), "/tmp"});
    CHECK(sandbox.readable == std::vector<std::string>{(real / "worker.sh").string()});
    CHECK_FALSE(sandbox.network);

    CHECK(load_config(folder.config(one_pack(R"("sandbox": {"network": true})"))).packs[0].sandbox->network);
    CHECK_FALSE(load_config(folder.config(one_pack())).packs[0].sandbox);
    const auto host = load_config(folder.config(one_pack("", R"("comfyui": {"command": "worker.sh", "sandbox": {}})")));
    CHECK(host.comfyui->sandbox->writable == std::vector<std::string>{real.string()});
}

TEST_CASE("a config that is a directory cannot be read") {
    const ConfigFolder folder;
    CHECK(load_error(folder.path().string()) ==
          folder.path().string() + ": cannot read: expected a regular file, found a directory");
}

TEST_CASE("a config that is a FIFO or a device is refused at once, never read") {
    const ConfigFolder folder;
    // Before: a FIFO blocked the supervisor forever, /dev/zero grew it by a GB a second.
    const std::string fifo = (folder.path() / "fifo.json").string();
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK(load_error(fifo) == fifo + ": cannot read: expected a regular file, found a FIFO (named pipe)");
    CHECK(load_error("/dev/zero") == "/dev/zero: cannot read: expected a regular file, found a character device");
}

TEST_CASE("a config nested too deep or with a number no double holds is refused with its line and column") {
    const ConfigFolder folder;
    // Before: 65,000 levels overflowed the stack; 1E400 came out as nlohmann's own message
    // with no file name.
    const std::string deep = folder.config(R"({"packs": )" + std::string(65000, '[') + std::string(65000, ']') + "}");
    CHECK(load_error(deep) ==
          deep + ": at line 1, column 74: expected arrays and objects nested at most 64 deep, found one nested deeper");
    const std::string huge = folder.config(with_limits(R"({"heartbeat_timeout_ms": 1E400})"));
    CHECK(load_error(huge) ==
          huge + ": at line 1, column 37: expected a number a double holds (at most about 1.8E308), found 1E400");
    // A value nested near the limit is shown cut short, like any other.
    const std::string nested = folder.config(with_device(std::string(60, '[') + std::string(60, ']')));
    CHECK_THAT(load_error(nested), Contains("at /device: expected an object, found " + std::string(57, '[') + "..."));
}

TEST_CASE("a config of a million objects is refused in linear time, repeated keys still found") {
    const ConfigFolder folder;
    std::string packs;
    for (int i = 0; i < 1'000'000; ++i) packs += i ? ",{}" : "{}";
    // Before: the repeated-key check ran as nlohmann's parser callback, which scans the
    // enclosing array at the end of every object: hours for this file.
    const auto started = std::chrono::steady_clock::now();
    CHECK_THAT(load_error(folder.config(R"({"packs": [)" + packs + "]}")), Contains("expected at most 63 packs"));
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(20));
    CHECK_THAT(load_error(folder.config(R"({"packs": [{}, {"a": [{"b": 1, "b": 2}]}]})")),
               Contains("at /packs/1/a/0/b: expected each key once in its object"));
}

TEST_CASE("a pack whose command line exec would refuse is refused, naming the pack") {
    const ConfigFolder folder;
    const auto arg_max = static_cast<std::size_t>(::sysconf(_SC_ARG_MAX));
    const std::size_t max_arg = 32 * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    // Before: accepted, then every start failed with E2BIG until the pack was marked failed.
    SECTION("arguments that pass ARG_MAX together") {
        nlohmann::json args = nlohmann::json::array();
        const std::size_t each = 100'000;
        for (std::size_t total = 0; total <= std::min(arg_max, std::size_t{6} << 20); total += each) {
            args.push_back(std::string(each, 'a'));
        }
        const std::string file = folder.config(one_pack(R"("args": )" + args.dump()));
        const std::string message = load_error(file);
        CHECK_THAT(message, StartsWith(file + ": at /packs/0: expected a command, args and environment that exec takes"));
        CHECK_THAT(message, Contains("for pack \"a\""));
    }
    SECTION("one argument longer than exec takes") {
        const std::string file = folder.config(one_pack(R"("args": ["-v", ")" + std::string(max_arg, 'a') + R"("])"));
        CHECK_THAT(load_error(file), StartsWith(file + ": at /packs/0/args/1: expected a string of at most "));
    }
    SECTION("one variable longer than exec takes, its name counted") {
        const std::string value(max_arg - 2, 'v');  // "V=" and the value: one byte too many with the NUL
        const std::string file = folder.config(one_pack(R"("env": {"V": ")" + value + R"("})"));
        CHECK_THAT(load_error(file), StartsWith(file + ": at /packs/0/env/V: expected a string of at most "));
        const std::string fits = folder.config(one_pack(R"("env": {"V": ")" + value.substr(1) + R"("})"));
        CHECK(load_config(fits).packs.at(0).env.at("V").size() == max_arg - 3);
    }
    SECTION("the host is named as the host") {
        nlohmann::json env = nlohmann::json::object();
        for (std::size_t i = 0; i * 100'000 <= std::min(arg_max, std::size_t{6} << 20); ++i) {
            env["V" + std::to_string(i)] = std::string(100'000, 'v');
        }
        const nlohmann::json config = {{"comfyui", {{"command", "worker.sh"}, {"env", env}}},
                                       {"packs", {{{"name", "a"}, {"command", "worker.sh"}}}}};
        const std::string message = load_error(folder.config(config.dump()));
        CHECK_THAT(message, Contains(": at /comfyui: expected a command, args and environment that exec takes"));
        CHECK_THAT(message, Contains("for the ComfyUI host"));
    }
}
