// `comfy-supervisor check CONFIG`: a good config is one line on stdout and status 0, with
// its Python packs imported by their workers' --describe and nothing of the supervisor
// started (no participant's command run, no segment, no process left); every problem is
// one line on stderr naming the JSON pointer of its value and what to do, all of them
// told, and status 2; a config `run` would refuse is refused with `run`'s own line.
#include <catch2/catch.hpp>

#include "tests/support/sandbox_skip.hpp"
#include "tests/support/supervisor_process.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

using namespace comfy::test;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct Run {
    int status;
    std::string out;
    std::string err;
};

// `comfy-supervisor ARGUMENTS`, its stdout and stderr apart.
Run supervisor(const std::string& arguments, const TempFolder& folder) {
    const auto err = folder.path() / "stderr.txt";
    const auto ran = run_and_capture(supervisor_binary() + " " + arguments + " 2>'" + err.string() + "'");
    REQUIRE(ran.started);
    return {ran.status, ran.output, read_file(err)};
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream stream(text);
    for (std::string line; std::getline(stream, line);) lines.push_back(line);
    return lines;
}

// An executable script `name` in `folder` running `body`.
std::string script(const TempFolder& folder, const std::string& name, const std::string& body) {
    fs::create_directories((folder.path() / name).parent_path());
    const auto file = folder.write(name, "#!/bin/sh\n" + body + "\n");
    fs::permissions(file, static_cast<fs::perms>(0755));
    return file.string();
}

// A Python pack of the test packs in the python form, its worker in this machine's Python.
json python_pack(const std::string& name, const std::string& pack, const json& python = json::object()) {
    json section = {{"pack", std::string(TEST_PACKS) + "/" + pack}, {"interpreter", PYTHON3_PATH},
                    {"comfyui", FAKE_COMFYUI}};
    section.update(python);
    return {{"name", name}, {"python", section}, {"env", {{"PYTHONDONTWRITEBYTECODE", "1"}}}};
}

// The default instance's segment, which `run` without --instance would make.
fs::path default_segment() { return "/dev/shm/comfy-sv-" + std::to_string(::geteuid()) + "-default"; }

}  // namespace

TEST_CASE("check: a good config is one line and status 0, its Python packs imported and nothing else started") {
    const TempFolder folder("check");
    const auto started = folder.path() / "started";
    // The host and a command pack would say they ran; check runs neither.
    const auto host = script(folder, "host.sh", "touch '" + started.string() + "'");
    const auto worker = script(folder, "worker.sh", "touch '" + started.string() + "'");
    const auto pid_file = folder.path() / "lingering.pid";
    json lingering = python_pack("lingering", "lingering_pack");
    lingering["env"]["LINGERING_PACK_PID"] = pid_file.string();
    const auto config = folder.write("config.json", json{{"comfyui", {{"command", host}, {"checkout", FAKE_COMFYUI}}},
                                                         {"packs", {{{"name", "ref"}, {"command", worker}}, lingering}}}
                                                        .dump());
    const bool segment_before = fs::exists(default_segment());

    const auto run = supervisor("check " + config.string(), folder);

    INFO(run.err);
    CHECK(run.status == 0);
    CHECK(run.err.empty());
    CHECK(run.out == "comfy-supervisor: " + config.string() +
                         ": OK: the ComfyUI host and 2 packs; each Python pack imports: lingering (1 node class)\n");
    CHECK_FALSE(fs::exists(started));
    CHECK(fs::exists(default_segment()) == segment_before);
    // The pack's import ran (it wrote its helper's pid), and what it left running is gone.
    const auto pid = read_file(pid_file);
    REQUIRE_FALSE(pid.empty());
    CHECK_FALSE(process_exists(static_cast<pid_t>(std::stol(pid))));
}

TEST_CASE("check: every problem is one line naming its JSON pointer and what to do, and the status is 2") {
    const TempFolder folder("check");
    fs::create_directories(folder.path() / "not-comfyui");
    fs::create_directories(folder.path() / "also-not-comfyui");
    const auto old_python = script(folder, "old/python3", "echo 3.8");
    const auto broken_python = script(folder, "broken/python3", "echo 'cannot find its standard library' >&2; exit 1");
    const json config = {
        {"comfyui", {{"command", PYTHON3_PATH}, {"args", {"nowhere/main.py", "--cpu"}}, {"checkout", "not-comfyui"}}},
        {"packs",
         {python_pack("old", "example_pack", {{"interpreter", old_python}}), python_pack("broken", "broken_pack"),
          python_pack("elsewhere", "example_pack", {{"comfyui", "also-not-comfyui"}}),
          {{"name", "venv"}, {"command", broken_python}}}}};
    const auto file = folder.write("config.json", config.dump()).string();

    const auto run = supervisor("check " + file, folder);

    INFO(run.err);
    CHECK(run.status == 2);
    CHECK(run.out.empty());
    const std::string at = "comfy-supervisor: " + file + ": at ";
    const std::vector<std::string> expected = {
        at + "/comfyui/checkout: " + (folder.path() / "not-comfyui").string() +
            " is not a ComfyUI checkout (it has no comfy/model_management.py); name the folder of ComfyUI's main.py "
            "there",
        at + "/comfyui/args/0: " + (folder.path() / "nowhere/main.py").string() +
            " is not a file (arguments are taken from /comfyui/working_directory, " + folder.path().string() +
            "); name ComfyUI's main.py there",
        at + "/packs/0/python/interpreter: " + old_python +
            " is Python 3.8, and comfy_supervisor needs Python 3.9 or newer; name a newer interpreter there",
        at + "/packs/1/python/pack: pack \"broken\" does not import in its worker: cannot import broken_pack: "
             "ModuleNotFoundError: No module named 'some_dependency_not_installed' (in broken_pack/__init__.py:3)",
        at + "/packs/2/python/comfyui: " + (folder.path() / "also-not-comfyui").string() +
            " is not a ComfyUI checkout",
        at + "/packs/3/command: " + broken_python +
            " does not run (exited with status 1: cannot find its standard library); repair its venv or name another "
            "interpreter there",
    };
    const auto lines = lines_of(run.err);
    REQUIRE(lines.size() == expected.size());
    for (std::size_t index = 0; index < lines.size(); ++index) CHECK_THAT(lines[index], StartsWith(expected[index]));
}

TEST_CASE("check: a sandboxed Python pack is imported in its sandbox") {
    SKIP_WITHOUT_BWRAP();
    const TempFolder folder("check");
    fs::create_directories(folder.path() / "work");
    fs::create_directories(folder.path() / "elsewhere");
    // The same pack twice: its import writes beside the config, which only the sandboxed
    // one cannot (only its working directory is writable there).
    json free = python_pack("free", "lingering_pack");
    free["env"]["LINGERING_PACK_PID"] = (folder.path() / "elsewhere" / "free.pid").string();
    json boxed = python_pack("boxed", "lingering_pack");
    boxed["env"]["LINGERING_PACK_PID"] = (folder.path() / "elsewhere" / "boxed.pid").string();
    boxed["working_directory"] = "work";
    boxed["sandbox"] = json::object();
    const auto file = folder.write("config.json", json{{"packs", {free, boxed}}}.dump()).string();

    const auto run = supervisor("check " + file, folder);
    reap_orphans();

    INFO(run.err);
    CHECK(run.status == 2);
    const auto lines = lines_of(run.err);
    REQUIRE(lines.size() == 1);
    CHECK_THAT(lines[0], StartsWith("comfy-supervisor: " + file + ": at /packs/1/python/pack: pack \"boxed\" does not "
                                    "import in its worker: cannot import lingering_pack: "));
    CHECK(fs::exists(folder.path() / "elsewhere" / "free.pid"));
}

TEST_CASE("check: a config run would refuse is refused with run's own line") {
    const TempFolder folder("check");
    const auto worker = script(folder, "worker.sh", "exit 0");
    const std::vector<json> configs = {
        {{"packs", {{{"name", "a"}, {"command", worker}, {"colour", "red"}}}}},
        {{"packs", {python_pack("gone", "no_such_pack")}}},
    };
    for (const auto& config : configs) {
        const auto file = folder.write("config.json", config.dump()).string();
        const auto checked = supervisor("check " + file, folder);
        const auto ran = supervisor("run --config " + file, folder);
        INFO(checked.err);
        CHECK(checked.status == 2);
        CHECK(ran.status == 2);
        CHECK(lines_of(checked.err).size() == 1);
        CHECK(checked.err == ran.err);
    }
    CHECK_THAT(supervisor("check " + folder.write("config.json", configs[0].dump()).string(), folder).err,
               Contains("at /packs/0/colour: expected one of the keys"));
}

TEST_CASE("check: an import that outlasts limits.ready_timeout_ms is ended and told") {
    const TempFolder folder("check");
    // Its gate never opens: the import waits far longer than the limit.
    json gated = python_pack("gated", "gated_pack");
    gated["env"]["GATED_PACK_GATE"] = (folder.path() / "never").string();
    const auto file =
        folder.write("config.json", json{{"limits", {{"ready_timeout_ms", 100}}}, {"packs", {gated}}}.dump()).string();

    const auto run = supervisor("check " + file, folder);

    CHECK(run.status == 2);
    CHECK(run.err == "comfy-supervisor: " + file +
                         ": at /packs/0/python/pack: pack \"gated\" did not import within 100 ms "
                         "(/limits/ready_timeout_ms, which bounds its import at every start); make its import faster "
                         "or raise the limit\n");
}
