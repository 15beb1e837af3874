// A custom node pack in a worker process of its own (comfy_supervisor.pack_worker): the
// pack is imported with ComfyUI's comfy package on its path (our model of upstream under
// tests/host/fake_comfyui), its node interfaces are described, the pack is ready only once
// that succeeded, and a pack that cannot be imported is marked failed with its error, once,
// without a restart loop and without ever having been ready. A group of packs (several
// --pack) is imported into one worker, each node described as its own pack's.
#include <catch2/catch.hpp>

#include "tests/support/sanitizer_reports.hpp"
#include "tests/support/supervisor_process.hpp"

#include <fstream>
#include <iterator>
#include <sstream>

using namespace comfy;
using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

// `packs`: test packs' folders, one for a pack alone, several for a group.
std::vector<std::string> pack_worker_args(const std::vector<std::string>& packs, bool describe = false) {
    std::vector<std::string> args{"-m", "comfy_supervisor.pack_worker"};
    for (const auto& pack : packs) args.insert(args.end(), {"--pack", std::string(TEST_PACKS) + "/" + pack});
    args.insert(args.end(), {"--comfyui", FAKE_COMFYUI});
    if (describe) args.push_back("--describe");
    return args;
}

struct Described {
    int status = -1;
    std::string interfaces;  // its standard output
    std::string log;         // its standard error
};

// `pack_worker --describe` on a test pack, with `environment` (VAR='value' ...) and
// `comfyui_args` (" -- FLAG...") added.
Described describe(const std::vector<std::string>& packs, const std::string& environment = "",
                   const std::string& comfyui_args = "") {
    const TempFolder folder("describe");
    const auto log = folder.path() / "stderr.txt";
    std::string command = "env " + sanitizer_python_environment() + "PYTHONPATH=" + PARTICIPANT_PYTHONPATH +
                          " PYTHONDONTWRITEBYTECODE=1 " + environment + PYTHON3_PATH;
    for (const auto& arg : pack_worker_args(packs, true)) command += " '" + arg + "'";
    const auto run = run_and_capture(command + comfyui_args + " 2>'" + log.string() + "'");
    REQUIRE(run.started);
    std::ifstream errors(log);
    return {run.status, run.output, std::string(std::istreambuf_iterator<char>(errors), {})};
}

json python_pack(const std::string& name, const std::string& pack) {
    return {{"name", name},
            {"command", PYTHON3_PATH},
            {"args", pack_worker_args({pack})},
            {"env", {{"PYTHONPATH", PARTICIPANT_PYTHONPATH}, {"PYTHONDONTWRITEBYTECODE", "1"}}},
            {"restart", {{"initial_backoff_ms", 50}}}};
}

// What `comfyctl --instance INSTANCE ARGUMENTS` printed; fails the test when it failed.
std::string comfyctl_output(const std::string& instance, const std::string& arguments) {
    const auto run = run_and_capture(comfyctl_binary() + " --instance " + instance + " " + arguments);
    INFO(run.output);
    REQUIRE(run.status == 0);
    return run.output;
}

// `pack`'s state as comfyctl workers names it.
std::string comfyctl_state(const std::string& instance, const std::string& pack) {
    const json report = json::parse(comfyctl_output(instance, "workers --json"));
    for (const auto& row : report.at("workers")) {
        if (row.at("name") == pack) return row.at("state");
    }
    return "(no row)";
}

// The kinds of `pack`'s events in the supervisor's journal, in order: each state it went
// through, as recorded when it happened (no polling can miss one).
std::vector<std::string> event_kinds(const std::string& instance, const std::string& pack) {
    std::vector<std::string> kinds;
    std::istringstream lines(comfyctl_output(instance, "events --json"));
    for (std::string line; std::getline(lines, line);) {
        const json event = json::parse(line);
        if (event.at("pack") == pack) kinds.push_back(event.at("kind"));
    }
    return kinds;
}

}  // namespace

TEST_CASE("a Python pack joins in a worker of its own and describes its nodes") {
    SupervisorProcess supervisor(memory_config_of(json::array({python_pack("example", "example_pack")})));
    REQUIRE(supervisor.wait_for_state("example", ParticipantState::ready));
    REQUIRE(eventually([&] { return supervisor.log().find("example_pack: 2 node classes") != std::string::npos; },
                       std::chrono::seconds(10)));
    CHECK_THAT(supervisor.log(), Contains("pack_worker: example_pack: 2 node classes: AddNumbers, Echo"));
    CHECK(supervisor.stop() == 0);
}

TEST_CASE("a pack that fails to import is marked failed with its error in one line, and not restarted") {
    SupervisorProcess supervisor(memory_config_of(json::array({python_pack("broken", "broken_pack")})));
    REQUIRE(supervisor.wait_for_state("broken", ParticipantState::failed));
    const auto log = supervisor.log();
    INFO(log);
    // Where it failed: the file and line of the failing import, in one line of its own.
    CHECK(count_of(log, "broken: pack_worker: cannot import broken_pack: ModuleNotFoundError: No module named "
                        "'some_dependency_not_installed' (in broken_pack/__init__.py:3); fix the pack or its "
                        "venv") == 1);
    // The failure carries that line, where it outlasts the log's: the journal, comfyctl events, the dashboard.
    const std::string failed =
        "failed: it exited with status 78 (it cannot run as configured: \"pack_worker: cannot import broken_pack: "
        "ModuleNotFoundError: No module named 'some_dependency_not_installed'";
    CHECK_THAT(log, Contains("broken: " + failed));
    CHECK_THAT(log, Contains("then comfyctl retry the pack\"); not restarting until an operator asks (comfyctl retry "
                             "broken)"));
    std::istringstream failures(comfyctl_output(supervisor.instance(), "events --failures --json"));
    std::vector<json> events;
    for (std::string line; std::getline(failures, line);) events.push_back(json::parse(line));
    // Its death nobody asked for, and its failure: what went wrong, kept apart from routine events.
    REQUIRE(events.size() == 2);
    CHECK(events[0]["kind"] == "exited");
    CHECK(events[0]["level"] == "warning");
    CHECK(events[1]["kind"] == "failed");
    CHECK(events[1]["level"] == "error");
    CHECK(events[1]["text"].get<std::string>().starts_with(failed));
    CHECK(supervisor.participant("broken")->restarts == 0);
    // Joined before its import, never ready: not for a moment between its Hello and its exit.
    CHECK(event_kinds(supervisor.instance(), "broken") ==
          std::vector<std::string>{"spawned", "joined", "exited", "failed"});
    CHECK(count_of(log, "broken: ready (") == 0);
    CHECK(supervisor.stop() == 0);
}

TEST_CASE("a Python pack is spawning while its import runs, and ready once it succeeded") {
    const TempFolder folder("gate");
    auto pack = python_pack("gated", "gated_pack");
    pack["env"]["GATED_PACK_GATE"] = (folder.path() / "open").string();
    SupervisorProcess supervisor(memory_config_of(json::array({pack})));
    REQUIRE(eventually([&] { return supervisor.log().find("gated: joined (pid") != std::string::npos; },
                       std::chrono::seconds(20)));
    // Its import waits at the gate: joined, and not ready, to the segment and to comfyctl
    // (lifecycle_faults_test.cpp has one past the Hello's time-out).
    const auto importing = supervisor.participant("gated");
    REQUIRE(importing);
    CHECK(importing->state == ParticipantState::spawning);
    CHECK(importing->generation == 1);
    CHECK(comfyctl_state(supervisor.instance(), "gated") == "spawning");
    CHECK(event_kinds(supervisor.instance(), "gated") == std::vector<std::string>{"spawned", "joined"});

    folder.write("open", "");
    REQUIRE(supervisor.wait_for_state("gated", ParticipantState::ready, std::chrono::seconds(20)));
    CHECK(comfyctl_state(supervisor.instance(), "gated") == "ready");
    CHECK(event_kinds(supervisor.instance(), "gated") == std::vector<std::string>{"spawned", "joined", "ready"});
    const auto log = supervisor.log();
    INFO(log);
    CHECK(log.find("gated: joined (pid") < log.find("gated: ready (pid"));
    CHECK(supervisor.participant("gated")->pid == importing->pid);  // the same life, never restarted
    CHECK(supervisor.stop() == 0);
}

TEST_CASE("the pack worker describes each node class's interface as the host's proxy nodes need it") {
    const auto described = describe({"example_pack"});
    INFO(described.log);
    REQUIRE(described.status == 0);
    const json nodes = json::parse(described.interfaces);
    const json& add = nodes.at("AddNumbers");
    CHECK(add.at("display_name") == "Add two numbers");
    CHECK(add.at("RETURN_TYPES") == json::array({"INT"}));
    CHECK(add.at("RETURN_NAMES") == json::array({"sum"}));
    CHECK(add.at("FUNCTION") == "add");
    CHECK(add.at("INPUT_TYPES").at("required").at("a") == json::array({"INT", {{"default", 1}, {"min", 0}}}));
    const json& echo = nodes.at("Echo");
    CHECK(echo.at("OUTPUT_NODE") == true);
    CHECK(echo.at("IS_CHANGED") == true);
    CHECK(echo.at("INPUT_TYPES").at("optional").at("mode") == json::array({json::array({"plain", "loud"})}));
}

TEST_CASE("the pack worker leaves out a node class that cannot describe itself, in one line, and describes the rest") {
    const auto described = describe({"one_bad_class_pack"});
    INFO(described.log);
    REQUIRE(described.status == 0);
    const json nodes = json::parse(described.interfaces);
    CHECK(nodes.size() == 1);
    CHECK(nodes.at("Doubles").at("RETURN_TYPES") == json::array({"INT"}));
    // As ComfyUI, which lists every node of /object_info but one whose description raises.
    CHECK(described.log ==
          "pack_worker: one_bad_class_pack: node class 'ListsMissingFolder' left out (ComfyUI leaves it out too): its "
          "interface raised KeyError: \"no model folder 'unet_gguf' in this ComfyUI\" (in "
          "one_bad_class_pack/__init__.py:31); its other nodes register; fix or update the pack\n");
}

TEST_CASE("the pack worker sets up what ComfyUI's main.py has before it imports a pack") {
    // startup_pack fails to import, naming what is missing, unless its prestartup script
    // ran first, utils is the checkout's package (our model of upstream's nodes.py puts
    // comfy/ first on the path, as upstream's does), PromptServer.instance has its routes,
    // and the model folders and output directory follow ComfyUI's flags.
    const TempFolder folder("startup");
    const auto models = (folder.path() / "models").string();
    const auto output = (folder.path() / "output").string();
    const auto extra = folder.write("extra_model_paths.txt", "checkpoints: " + models + "\n");
    const auto described =
        describe({"startup_pack"}, "STARTUP_PACK_MODELS='" + models + "' STARTUP_PACK_OUTPUT='" + output + "' ",
                 " -- --extra-model-paths-config '" + extra.string() + "' --output-directory '" + output + "'");
    INFO(described.log);
    REQUIRE(described.status == 0);
    CHECK(json::parse(described.interfaces).contains("Ready"));
    // ComfyUI's logging: what the pack logs at INFO is written, as ComfyUI writes it.
    CHECK_THAT(described.log, Contains("startup_pack: imported with ComfyUI's start-up"));
}

TEST_CASE("the pack worker imports a group's packs into one worker, each node its own pack's, each prestartup run") {
    // Each of group_maker and group_taker fails to import unless its own prestartup script ran.
    const auto described = describe({"group_maker", "group_taker"});
    INFO(described.log);
    REQUIRE(described.status == 0);
    const json nodes = json::parse(described.interfaces);
    CHECK(nodes.size() == 2);
    CHECK(nodes.at("MakeSharedThing").at("python_module") == "custom_nodes.group_maker");
    CHECK(nodes.at("MakeSharedThing").at("RETURN_TYPES") == json::array({"SHARED_THING"}));
    CHECK(nodes.at("ReadSharedThing").at("python_module") == "custom_nodes.group_taker");
    CHECK(nodes.at("ReadSharedThing").at("INPUT_TYPES").at("required").at("thing") == json::array({"SHARED_THING"}));
}

TEST_CASE("a group whose packs define one node class twice is refused in one line naming both, as an import error") {
    const auto described = describe({"example_pack", "bridge_pack"});  // both have an Echo
    CHECK(described.status == 78);
    CHECK(described.interfaces.empty());
    CHECK(described.log == "pack_worker: cannot import bridge_pack beside example_pack: both define the node class "
                           "'Echo', and one worker has one class of a name; leave one of the two out of the group (the "
                           "config's \"pack\" list)\n");
}

TEST_CASE("a group's pack that cannot be imported is named in the one line") {
    const auto described = describe({"example_pack", "broken_pack"});
    CHECK(described.status == 78);
    CHECK_THAT(described.log, Contains("pack_worker: cannot import broken_pack: ModuleNotFoundError: No module named "
                                       "'some_dependency_not_installed' (in broken_pack/__init__.py:3)"));
    CHECK(count_of(described.log, "\n") == 1);
}
