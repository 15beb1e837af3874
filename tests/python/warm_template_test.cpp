// Warm templates end to end (supervisor/lifecycle/warm_templates.hpp,
// comfy_supervisor/template): packs whose interpreters resolve to one binary, with one
// environment, fork from one template; a venv of that binary goes on warm in its own paths;
// one whose environment has its own copy of a module the template imported execs and
// starts cold; one whose variables differ has no template at all. Each forked worker is the
// supervisor's own child, and a crashed one is forked again. The template runs ComfyUI's
// interpreter where it is the packs' binary too.
#include <catch2/catch.hpp>

#include "tests/python/bridge_checks_run.hpp"
#include "tests/support/supervisor_process.hpp"

#include <signal.h>

#include <fstream>
#include <sstream>

using namespace comfy;
using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

// A venv of the tests' interpreter that sees the system's packages, as `comfyctl pack add`'s
// environments see the host's; its site-packages folder.
std::filesystem::path make_venv(const std::filesystem::path& folder) {
    const auto made = run_and_capture(std::string(PYTHON3_PATH) + " -m venv --without-pip --system-site-packages '" +
                                      folder.string() + "' 2>&1 && '" + folder.string() +
                                      "/bin/python' -c 'import sysconfig; print(sysconfig.get_path(\"purelib\"))'");
    INFO(made.output);
    REQUIRE(made.status == 0);
    auto site = made.output;
    site.erase(site.find_last_not_of('\n') + 1);
    return site.substr(site.rfind('\n') + 1);
}

pid_t parent_of(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    std::istringstream after(text.substr(text.rfind(')') + 2));
    char state = 0;
    pid_t parent = 0;
    after >> state >> parent;
    return parent;
}

std::string name_of(pid_t pid) {
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    std::getline(comm, name);
    return name;
}

}  // namespace

TEST_CASE("packs that share an interpreter fork from one warm template, and a crashed worker is forked again") {
    TempFolder folder("warm-template");
    const auto plain_site = make_venv(folder.path() / "plain");
    const auto own_site = make_venv(folder.path() / "own");
    // This environment's own idna, which the template imported (aiohttp's yarl imports it).
    std::ofstream(own_site / "idna.py") << "# this environment's own idna\n";
    auto in_venv = [&](json pack, const std::string& venv) {
        pack["python"]["interpreter"] = (folder.path() / venv / "bin" / "python").string();
        return pack;
    };
    auto apart = python_pack("apart", "bridge_pack");
    apart["env"]["COMFY_TEST_APART"] = "1";
    // The pack with its own idna comes first: the template runs the host's interpreter, the
    // same binary, not that pack's, whose idna would send every other pack cold.
    auto config = memory_config_of(json::array({in_venv(python_pack("three", "bridge_pack"), "own"),
                                                python_pack("one", "bridge_pack"),
                                                in_venv(python_pack("two", "model_pack"), "plain"), apart}));
    config["comfyui"] = {{"command", PYTHON3_PATH},
                         {"args", json::array({HOST_PARTICIPANT_PATH})},
                         {"env", {{"PYTHONPATH", PARTICIPANT_PYTHONPATH}, {"PYTHONDONTWRITEBYTECODE", "1"}}}};
    SupervisorProcess supervisor(config);
    REQUIRE(supervisor.wait_for([](const auto& table) {
        return table.size() == 5 && std::all_of(table.begin(), table.end(), [](const Participant& p) {
                   return p.state == ParticipantState::ready;
               });
    }, std::chrono::seconds(90)));
    auto log = supervisor.log();
    INFO(log);
    const std::string ready_line = "(packs three, one, two) ready: pid ";
    CHECK_THAT(log, Contains(ready_line));
    for (const std::string pack : {"one", "two", "three"}) {
        CHECK_THAT(log, Contains(pack + ": spawned pid " + std::to_string(supervisor.participant(pack)->pid) +
                                 " (generation 1, forked from the warm template of "));
    }
    CHECK_THAT(log, Contains("apart: spawned pid " + std::to_string(supervisor.participant("apart")->pid) +
                             " (generation 1)"));
    // Its environment's idna is not the template's: it execs and starts cold, in the same process.
    CHECK_THAT(log, Contains("three: pack_worker: started cold, not from the warm template: its environment finds "
                             "idna at " + (own_site / "idna.py").string()));
    CHECK(count_of(log, "pack_worker: started cold") == 1);
    // Each is the supervisor's own child; a warm one is named after its pack.
    for (const std::string pack : {"one", "two", "three", "apart"}) {
        CHECK(parent_of(supervisor.participant(pack)->pid) == supervisor.pid());
    }
    CHECK(name_of(supervisor.participant("one")->pid) == "pack one");
    CHECK(name_of(supervisor.participant("two")->pid) == "pack two");
    std::ifstream cmdline("/proc/" + std::to_string(supervisor.participant("one")->pid) + "/cmdline");
    std::string line((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
    CHECK_THAT(line, Contains(" -m comfy_supervisor.pack_worker --name one (forked from a warm template)"));

    SECTION("a crashed worker is forked from the template again") {
        ::kill(supervisor.participant("one")->pid, SIGKILL);
        REQUIRE(supervisor.wait_for([](const auto& table) {
            return std::any_of(table.begin(), table.end(), [](const Participant& p) {
                return p.name == "one" && p.generation == 2 && p.state == ParticipantState::ready;
            });
        }, std::chrono::seconds(60)));
        CHECK_THAT(supervisor.log(), Contains("one: spawned pid " + std::to_string(supervisor.participant("one")->pid) +
                                              " (generation 2, forked from the warm template of "));
    }
    SECTION("without its template, a crashed worker starts cold") {
        const auto template_pid = std::stoi(log.substr(log.find(ready_line) + ready_line.size()));
        ::kill(template_pid, SIGKILL);
        REQUIRE(eventually([&] { return supervisor.log().find("within a minute of its start") != std::string::npos; },
                           std::chrono::seconds(10)));
        ::kill(supervisor.participant("two")->pid, SIGKILL);
        REQUIRE(supervisor.wait_for([](const auto& table) {
            return std::any_of(table.begin(), table.end(), [](const Participant& p) {
                return p.name == "two" && p.generation == 2 && p.state == ParticipantState::ready;
            });
        }, std::chrono::seconds(60)));
        log = supervisor.log();
        CHECK_THAT(log, Contains("two: spawned pid " + std::to_string(supervisor.participant("two")->pid) +
                                 " (generation 2)"));
        CHECK_THAT(log, Contains("killed by SIGKILL within a minute of its start; its packs start cold"));
    }
    CHECK(supervisor.stop() == 0);
}
