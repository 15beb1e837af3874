// Start-up failures are counted as failures, and never take the instance down, through the
// real binary: a Python pack whose environment was deleted fails alone at its start (the
// instance and the other pack run; `check` still stops on it), says why and what to do in
// comfyctl workers, its events and the census the dashboard reads, and starts at its retry
// once the environment is there again; a pack whose command cannot be executed is failed
// at its first try, never restarted; a Python pack that registers no node class is ready
// with a warning, said once in the log. A sandboxed pack's environment, which the sandbox
// hides when it lies under /tmp, is shown as it is at each start, not as it was at load.
#include <catch2/catch.hpp>

#include "tests/support/http_client.hpp"
#include "tests/support/sandbox_skip.hpp"
#include "tests/support/supervisor_process.hpp"

#include <signal.h>

#include <filesystem>
#include <sstream>

using namespace comfy;
using namespace comfy::test;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A Python pack of `folder`, run by `python` ({"environment": ...} or {"interpreter": ...}).
json python_pack(const std::string& name, const std::string& folder, const json& python) {
    json section = {{"pack", folder}, {"comfyui", FAKE_COMFYUI}};
    section.update(python);
    return {{"name", name}, {"python", section}, {"env", {{"PYTHONDONTWRITEBYTECODE", "1"}}}};
}

// What `comfyctl --instance INSTANCE ARGUMENTS` printed; fails the test when it failed.
std::string comfyctl_output(const std::string& instance, const std::string& arguments) {
    const auto run = run_and_capture(comfyctl_binary() + " --instance " + instance + " " + arguments);
    INFO(run.output);
    REQUIRE(run.status == 0);
    return run.output;
}

// `pack`'s entry of `comfyctl workers --json`.
json worker_entry(const std::string& instance, const std::string& pack) {
    const json report = json::parse(comfyctl_output(instance, "workers --json"));
    for (const auto& row : report.at("workers")) {
        if (row.at("name") == pack) return row;
    }
    FAIL("no row for " << pack);
    return {};
}

// The supervisor's failures (comfyctl events --failures --json) about `pack`.
std::vector<json> failures_of(const std::string& instance, const std::string& pack) {
    std::vector<json> events;
    std::istringstream lines(comfyctl_output(instance, "events --failures --json"));
    for (std::string line; std::getline(lines, line);) {
        const json event = json::parse(line);
        if (event.at("pack") == pack) events.push_back(event);
    }
    return events;
}

}  // namespace

TEST_CASE("a pack whose environment was deleted fails alone at its start, check stops on it, and its retry starts "
          "it once the environment is there") {
    const TempFolder folder("env-gone");
    const fs::path env = folder.path() / "envs" / "example";
    const std::string pack_folder = std::string(TEST_PACKS) + "/example_pack";
    json config = memory_config_of(json::array(
        {reference_pack(folder, "ref", idle_pack()), python_pack("example", pack_folder, {{"environment", env.string()}})}));
    const auto file = folder.write("config.json", config.dump());
    SupervisorProcess supervisor(config);

    REQUIRE(supervisor.wait_for_state("example", ParticipantState::failed, std::chrono::seconds(30)));
    REQUIRE(supervisor.wait_for_state("ref", ParticipantState::ready, std::chrono::seconds(30)));
    CHECK(supervisor.participant("example")->restarts == 0);
    CHECK(supervisor.participant("example")->generation == 0);  // never spawned
    // The fix names the pack as `run` was given it: its own copy of the config.
    const std::string why_start = "failed: it cannot start: pack example's environment " + env.string() +
                                  " is missing: run comfyctl pack add " + pack_folder + " --name example --config ";
    const json entry = worker_entry(supervisor.instance(), "example");
    CHECK(entry["state"] == "failed");
    CHECK_THAT(entry["note"].get<std::string>(), StartsWith(why_start));
    CHECK_THAT(entry["note"].get<std::string>(), Contains(" to build it; then comfyctl retry example"));
    const auto text = comfyctl_output(supervisor.instance(), "workers");
    CHECK_THAT(text, Contains("failed (!)"));
    CHECK_THAT(text, Contains("\n(!) example: " + why_start));
    const auto failures = failures_of(supervisor.instance(), "example");
    REQUIRE(failures.size() == 1);  // no exit, no restart: one failure
    CHECK(failures[0]["kind"] == "failed");
    CHECK_THAT(failures[0]["text"].get<std::string>(), StartsWith(why_start));

    // `check` is where it stops: status 2, the pack's environment named.
    const auto check = run_and_capture(supervisor_binary() + " check " + file.string() + " 2>&1");
    CHECK(check.status == 2);
    CHECK_THAT(check.output, Contains(file.string() + ": at /packs/1/python/environment: pack example's environment " +
                                      env.string() + " is missing: run comfyctl pack add " + pack_folder +
                                      " --name example --config " + file.string() + " to build it"));

    // Built again (here: the lock, and the interpreter as a venv's link), the retry starts
    // it, without restarting the supervisor.
    fs::create_directories(env / "bin");
    folder.write("envs/example/comfy-env.lock.json", "{}");
    fs::create_symlink(PYTHON3_PATH, env / "bin" / "python");
    CHECK(comfyctl_output(supervisor.instance(), "retry example") == "starting example\n");
    REQUIRE(supervisor.wait_for_state("example", ParticipantState::ready, std::chrono::seconds(60)));
    const json ready = worker_entry(supervisor.instance(), "example");
    CHECK(ready["note"].is_null());
    CHECK(ready["node_classes"] == 2);
    CHECK(supervisor.stop() == 0);
}

TEST_CASE("a sandboxed pack whose environment under /tmp was missing at load starts in that environment at its "
          "retry once it is built") {
    SKIP_WITHOUT_BWRAP();
    const TempFolder folder("sandboxed-env-gone", "/tmp");  // what the sandbox hides, whatever $TMPDIR says
    const fs::path env = folder.path() / "envs" / "needs_env", work = folder.path() / "work";
    fs::create_directories(folder.path() / "needs_env");
    fs::create_directories(work);
    // A pack whose nodes only its environment has: run outside it, its import fails.
    folder.write("needs_env/__init__.py", "from env_only import NODE_CLASS_MAPPINGS  # noqa: F401\n");
    json pack = python_pack("needs_env", (folder.path() / "needs_env").string(), {{"environment", env.string()}});
    pack["working_directory"] = work.string();
    pack["sandbox"] = json::object();
    SupervisorProcess supervisor(memory_config_of(json::array({reference_pack(folder, "ref", idle_pack()), pack})));
    REQUIRE(supervisor.wait_for_state("needs_env", ParticipantState::failed, std::chrono::seconds(30)));
    REQUIRE(supervisor.wait_for_state("ref", ParticipantState::ready, std::chrono::seconds(30)));
    CHECK(supervisor.participant("needs_env")->generation == 0);  // never spawned
    CHECK_THAT(worker_entry(supervisor.instance(), "needs_env")["note"].get<std::string>(),
               Contains("pack needs_env's environment " + env.string() + " is missing"));

    // Built as comfyctl pack add builds one: a venv (its python a link to the test's, outside
    // /tmp), the pack's requirement in its site-packages, and the lock written last.
    const auto made =
        run_and_capture(std::string(PYTHON3_PATH) + " -m venv --without-pip '" + env.string() + "' 2>&1");
    INFO(made.output);
    REQUIRE(made.status == 0);
    fs::path site_packages;
    for (const auto& entry : fs::directory_iterator(env / "lib")) site_packages = entry.path() / "site-packages";
    REQUIRE(fs::is_directory(site_packages));
    folder.write(fs::relative(site_packages / "env_only.py", folder.path()).string(),
                 "class Twice:\n"
                 "    CATEGORY = 'comfy-supervisor tests'\n"
                 "    RETURN_TYPES = ('INT',)\n"
                 "    FUNCTION = 'twice'\n"
                 "\n"
                 "    @classmethod\n"
                 "    def INPUT_TYPES(cls):\n"
                 "        return {'required': {'a': ('INT', {'default': 1})}}\n"
                 "\n"
                 "    def twice(self, a):\n"
                 "        return (2 * a,)\n"
                 "\n"
                 "\n"
                 "NODE_CLASS_MAPPINGS = {'Twice': Twice}\n");
    // The lock of today's inputs, as the tool computes them inside the environment.
    const auto locked = run_and_capture(
        "PYTHONPATH=" + std::string(COMFY_SV_PYTHON_DIR) + " '" + (env / "bin" / "python").string() +
        "' -c 'import sys; from comfy_supervisor.environments import key, lock, stamp; "
        "today = stamp._today({}, [sys.argv[2]], sys.argv[3])[0]; "
        "lock.write(sys.argv[1], key.key_of(today), today, {})' '" +
        env.string() + "' '" + (folder.path() / "needs_env").string() + "' '" + FAKE_COMFYUI + "' 2>&1");
    INFO(locked.output);
    REQUIRE(locked.status == 0);

    CHECK(comfyctl_output(supervisor.instance(), "retry needs_env") == "starting needs_env\n");
    REQUIRE(supervisor.wait_for([](const std::vector<Participant>& table) {
        for (const auto& p : table) {
            if (p.name == "needs_env") return p.state == ParticipantState::ready || p.state == ParticipantState::failed;
        }
        return false;
    }, std::chrono::seconds(60)));
    INFO(supervisor.log());
    REQUIRE(supervisor.participant("needs_env")->state == ParticipantState::ready);
    const json ready = worker_entry(supervisor.instance(), "needs_env");
    CHECK(ready["note"].is_null());
    CHECK(ready["node_classes"] == 1);  // described itself, its node from the environment
    CHECK(supervisor.stop() == 0);
    reap_orphans();
}

TEST_CASE("a pack whose command cannot be executed is failed at its first try with the path and the fix, and a "
          "crash is still restarted") {
    const TempFolder folder("no-interpreter");
    // There, executable, and naming an interpreter that is not: the exec fails with ENOENT.
    const auto script = folder.write("worker.py", "#!/nonexistent/bin/python3\nprint('never')\n");
    fs::permissions(script, static_cast<fs::perms>(0755));
    json orphan = {{"name", "orphan"}, {"command", script.string()}, {"restart", {{"initial_backoff_ms", 50}}}};
    SupervisorProcess supervisor(memory_config_of(json::array({reference_pack(folder, "ref", idle_pack()), orphan})));

    REQUIRE(supervisor.wait_for_state("orphan", ParticipantState::failed, std::chrono::seconds(30)));
    CHECK(supervisor.participant("orphan")->restarts == 0);
    const json entry = worker_entry(supervisor.instance(), "orphan");
    CHECK(entry["note"] == "failed: it cannot start: cannot execute its command " + script.string() +
                               ": No such file or directory (its first line names /nonexistent/bin/python3, which is "
                               "not there); install it, or name an interpreter that is there on that line; then "
                               "comfyctl retry orphan");
    CHECK(count_of(supervisor.log(), "orphan: spawned pid") == 1);

    // A crash of a pack whose command ran is counted and restarted as before.
    REQUIRE(supervisor.wait_for_state("ref", ParticipantState::ready, std::chrono::seconds(30)));
    REQUIRE(::kill(supervisor.participant("ref")->pid, SIGKILL) == 0);
    REQUIRE(supervisor.wait_for([](const std::vector<Participant>& table) {
        for (const auto& p : table) {
            if (p.name == "ref") return p.restarts == 1 && p.state == ParticipantState::ready;
        }
        return false;
    }, std::chrono::seconds(30)));
    CHECK(supervisor.stop() == 0);
}

TEST_CASE("a Python pack that registers no node class is ready with a warning in comfyctl workers, its JSON and the "
          "dashboard's census, said once in the log") {
    const TempFolder folder("no-nodes");
    fs::create_directories(folder.path() / "empty_pack");
    folder.write("empty_pack/__init__.py", "NODE_CLASS_MAPPINGS = {}\n");
    json config = memory_config_of(json::array(
        {python_pack("empty", (folder.path() / "empty_pack").string(), {{"interpreter", PYTHON3_PATH}}),
         python_pack("example", std::string(TEST_PACKS) + "/example_pack", {{"interpreter", PYTHON3_PATH}})}));
    config["http"] = {{"listen", "127.0.0.1:0"}};
    SupervisorProcess supervisor(config);
    const auto port = http_port(supervisor, std::chrono::seconds(30));
    REQUIRE(port);
    REQUIRE(supervisor.wait_for_state("empty", ParticipantState::ready, std::chrono::seconds(60)));
    REQUIRE(supervisor.wait_for_state("example", ParticipantState::ready, std::chrono::seconds(60)));

    const std::string warning =
        "warning: pack empty registered no node classes, so ComfyUI has none of its nodes: check that its "
        "__init__.py sets NODE_CLASS_MAPPINGS, what its import printed in this log, and whether it needs its "
        "install.py run (comfyctl pack add " + (folder.path() / "empty_pack").string() + " --run-install-py)";
    const json entry = worker_entry(supervisor.instance(), "empty");
    CHECK(entry["state"] == "ready");
    CHECK(entry["node_classes"] == 0);
    CHECK(entry["note"] == warning);
    CHECK(worker_entry(supervisor.instance(), "example")["note"].is_null());
    const auto text = comfyctl_output(supervisor.instance(), "workers");
    CHECK_THAT(text, Contains("ready (!)"));
    CHECK_THAT(text, Contains("\n(!) empty: " + warning + "\n"));
    // The dashboard draws what /census says.
    const auto census = http_request(*port, "GET", "/census");
    REQUIRE(census.status == 200);
    bool seen = false;
    const json dashboard = json::parse(census.body);
    for (const auto& row : dashboard.at("workers")) {
        if (row["name"] == "empty") seen = row["note"] == warning && row["node_classes"] == 0;
    }
    CHECK(seen);
    const auto failures = failures_of(supervisor.instance(), "empty");
    REQUIRE(failures.size() == 1);
    CHECK(failures[0]["kind"] == "no_nodes");
    CHECK(count_of(supervisor.log(), "registered no node classes") == 1);
    CHECK(supervisor.stop() == 0);
}
