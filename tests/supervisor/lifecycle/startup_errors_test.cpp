// Bad start-up input through the real binary: exit status 2, one line naming the file,
// the JSON path (or line and column), the expectation and the finding, and nothing
// spawned or left behind; an input file that is not a regular one is never read. A CUDA
// device that is not there: waited for, then a status that systemd restarts.
#include <catch2/catch.hpp>

#include "ipc/shm_segment.hpp"
#include "supervisor/arbiter/trace.hpp"
#include "tests/support/sanitizer_reports.hpp"
#include "tests/support/supervisor_process.hpp"
#include "tests/support/test_instance.hpp"
#include "worker/device_factory.hpp"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

using namespace comfy::test;
using Catch::Matchers::Contains;

namespace {

struct Run {
    int status;
    std::string stderr_text;
};

// `prefix` goes before the command (limits for the shell to set), `more` after the arguments.
Run run_supervisor(const std::string& arguments, const TempFolder& folder, const std::string& prefix = "",
                   const std::string& more = "") {
    const auto err = folder.path() / "stderr.txt";
    const std::string command = prefix + supervisor_binary() + " " + arguments + more + " 2>" + err.string();
    const int raw = std::system(command.c_str());
    return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, read_file(err)};
}

struct BadConfig {
    const char* what;
    std::string text;
    const char* message;
};

struct BadRun {
    const char* what;
    std::string arguments;
    std::string message;
};

}  // namespace

TEST_CASE("bad configs stop start-up with status 2 and one line naming path, expectation and finding") {
    TempFolder folder("cfg");
    // Built with append: `"\"" + std::string` makes GCC 12 at -O3 warn (-Wrestrict, a
    // false positive inside std::string's insert), an error with -Werror.
    const std::string worker = std::string("\"").append(worker_binary()).append("\"");
    const std::string pack = "{\"name\": \"a\", \"command\": " + worker + "}";
    const std::vector<BadConfig> table = {
        {"not JSON", "{\"packs\": [", "not valid JSON"},
        {"no packs", "{}", "/packs"},
        {"empty packs", "{\"packs\": []}", "/packs"},
        {"packs of the wrong type", "{\"packs\": 3}", "/packs"},
        {"unknown top-level key", "{\"packs\": [" + pack + "], \"pakcs\": 1}", "/pakcs"},
        {"unknown pack key", "{\"packs\": [{\"name\": \"a\", \"command\": " + worker + ", \"cmd\": 1}]}",
         "/packs/0/cmd"},
        {"duplicate pack names", "{\"packs\": [" + pack + ", " + pack + "]}", "/packs/1/name"},
        {"missing command", "{\"packs\": [{\"name\": \"a\"}]}", "/packs/0"},
        {"command not found", "{\"packs\": [{\"name\": \"a\", \"command\": \"/nonexistent/worker\"}]}",
         "/packs/0/command"},
        {"bad pack name", "{\"packs\": [{\"name\": \"a b\", \"command\": " + worker + "}]}", "/packs/0/name"},
        {"device too small",
         "{\"device\": {\"kind\": \"simulated\", \"total_bytes\": \"1MiB\"}, \"packs\": [" + pack + "]}",
         "/device/total_bytes"},
        {"size with a bad unit",
         "{\"device\": {\"kind\": \"simulated\", \"total_bytes\": \"24 parsecs\"}, \"packs\": [" + pack + "]}",
         "/device/total_bytes"},
        {"heartbeat of the wrong type", "{\"limits\": {\"heartbeat_timeout_ms\": \"soon\"}, \"packs\": [" + pack + "]}",
         "/limits/heartbeat_timeout_ms"},
        {"ring slots not a power of two", "{\"limits\": {\"ring_slots\": 100}, \"packs\": [" + pack + "]}",
         "ring_slots"},
        {"backoff cap below its start",
         "{\"packs\": [{\"name\": \"a\", \"command\": " + worker +
             ", \"restart\": {\"initial_backoff_ms\": 500, \"max_backoff_ms\": 100}}]}",
         "/packs/0/restart/max_backoff_ms"},
    };
    for (const auto& row : table) {
        INFO(row.what);
        const auto file = folder.write("bad.json", row.text);
        const auto instance = test_instance("bad");
        const auto run = run_supervisor("run --config " + file.string() + " --instance " + instance, folder);
        CHECK(run.status == 2);
        CHECK_THAT(run.stderr_text, Contains(file.string()));
        CHECK_THAT(run.stderr_text, Contains(row.message));
        CHECK(std::count(run.stderr_text.begin(), run.stderr_text.end(), '\n') == 1);
        // Nothing was created.
        CHECK(comfy::ipc::inspect_segment(comfy::ipc::segment_name(instance)).state ==
              comfy::ipc::SegmentState::absent);
    }
}

TEST_CASE("usage errors and an unreadable config give status 2 and say what to do") {
    TempFolder folder("cfg");
    CHECK_THAT(run_supervisor("", folder).stderr_text, Contains("usage: comfy-supervisor run --config FILE"));
    CHECK(run_supervisor("", folder).status == 2);
    CHECK(run_supervisor("run", folder).status == 2);
    CHECK(run_supervisor("run --config", folder).status == 2);
    CHECK(run_supervisor("run --bogus x", folder).status == 2);
    const auto missing = run_supervisor("run --config /nonexistent/config.json", folder);
    CHECK(missing.status == 2);
    CHECK_THAT(missing.stderr_text, Contains("/nonexistent/config.json: cannot read"));
}

TEST_CASE("a second supervisor on a live instance refuses to start with status 2 and touches nothing") {
    TempFolder packs("packs");
    const nlohmann::json config = {{"device", simulated_device()},
                                   {"packs", {reference_pack(packs, "solo", idle_pack())}}};
    SupervisorProcess first(config);
    REQUIRE(first.wait_for([](const auto& t) { return t.size() == 1 && t[0].state == comfy::ParticipantState::ready; }));
    const auto file = packs.write("config.json", config.dump());
    const auto second = run_supervisor("run --config " + file.string() + " --instance " + first.instance(), packs);
    CHECK(second.status == 2);
    CHECK_THAT(second.stderr_text, Contains("in use by a live supervisor"));
    CHECK(std::count(second.stderr_text.begin(), second.stderr_text.end(), '\n') == 1);
    CHECK(first.participant("solo")->state == comfy::ParticipantState::ready);
    CHECK(first.stop() == 0);
}

TEST_CASE("an unusable CUDA device is waited for, then stops start-up with a status systemd restarts, or falls back") {
    TempFolder packs("cuda");
    // Device 63: no machine this runs on has 64 GPUs, so it is unusable everywhere.
    nlohmann::json config = {{"device", {{"kind", "cuda"}, {"index", 63}, {"fallback", "stop"}, {"wait_ms", 300}}},
                             {"packs", {reference_pack(packs, "solo", idle_pack())}}};
    const auto file = packs.write("config.json", config.dump());
    const auto stopped = run_supervisor("run --config " + file.string() + " --instance " + test_instance("cuda"), packs);
    const auto& said = stopped.stderr_text;
    INFO(said);
    const auto reason = comfy::worker::cuda_unavailable_reason(63);
    REQUIRE(reason);
    CHECK_THAT(said, Contains(*reason));
    if (comfy::worker::built_with_cuda()) {
        // The driver may yet come: tried again with backoff, then an exit systemd restarts.
        CHECK(stopped.status == 75);
        CHECK_THAT(said, Contains("waiting up to 300 ms (device.wait_ms) for CUDA device 63"));
        CHECK_THAT(said, Contains("after waiting 300 ms (device.wait_ms); install or start the NVIDIA driver"));
        CHECK_THAT(said, Contains("set \"device\": {\"kind\": \"simulated\", \"total_bytes\": \"24GiB\"} in " +
                                  file.string()));
        CHECK(std::count(said.begin(), said.end(), '\n') == 2);  // the wait's line, then the verdict's
    } else {
        // This build can never use it: a bad config's status, at once.
        CHECK(stopped.status == 2);
        CHECK_THAT(said, Contains("rebuild with the CUDA toolkit"));
        CHECK(std::count(said.begin(), said.end(), '\n') == 1);
    }

    config["device"]["fallback"] = "simulated";
    SupervisorProcess fell_back(config);
    REQUIRE(fell_back.wait_for([](const auto& t) { return t.size() == 1 && t[0].state == comfy::ParticipantState::ready; }));
    CHECK_THAT(fell_back.log(), Contains("using the simulated device instead"));
    CHECK_THAT(fell_back.log(), Contains("supervising a simulated device: 24 GiB"));
    CHECK(fell_back.stop() == 0);
}

TEST_CASE("a device section without a kind means the GPU, and one for a simulated device says to name it") {
    TempFolder packs("default-device");
    const auto config_of = [&](const nlohmann::json& device) {
        return nlohmann::json{{"device", device}, {"packs", {reference_pack(packs, "solo", idle_pack())}}}.dump();
    };
    const auto run_with = [&](const std::string& name, const nlohmann::json& device) {
        const auto file = packs.write(name + ".json", config_of(device));
        return run_supervisor("run --config " + file.string() + " --instance " + test_instance(name), packs);
    };
    // What a config written when the simulated device was the default looks like.
    const auto refused = run_with("sized", {{"total_bytes", "24GiB"}});
    CHECK(refused.status == 2);
    CHECK_THAT(refused.stderr_text,
               Contains("at /device/total_bytes: expected one of the keys kind, index, fallback, wait_ms (for a "
                        "\"cuda\" device, the default; add \"kind\": \"simulated\""));
    const auto reason = comfy::worker::cuda_unavailable_reason(0);
    if (!reason) return;  // a GPU here: it would start on it
    const auto stopped = run_with("kindless", {{"wait_ms", 0}});
    INFO(stopped.stderr_text);
    CHECK(stopped.status == (comfy::worker::built_with_cuda() ? 75 : 2));
    CHECK_THAT(stopped.stderr_text, Contains(*reason));
    CHECK_THAT(stopped.stderr_text, Contains("\"device\": {\"kind\": \"simulated\""));
    CHECK(std::count(stopped.stderr_text.begin(), stopped.stderr_text.end(), '\n') == 1);
}

TEST_CASE("input files that cannot be taken stop the supervisor at once with status 2 and one line") {
    TempFolder folder("input");
    const std::string worker = std::string("\"").append(worker_binary()).append("\"");
    const std::string pack = "{\"name\": \"a\", \"command\": " + worker + "}";
    const auto config =
        folder.write("config.json", "{\"device\": {\"kind\": \"simulated\"}, \"packs\": [" + pack + "]}").string();
    const auto fifo = (folder.path() / "fifo.json").string();
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const auto deep = folder.write("deep.json", std::string(65000, '[') + std::string(65000, ']')).string();
    const auto huge_number =
        folder.write("huge.json", "{\"limits\": {\"heartbeat_timeout_ms\": 1E400}, \"packs\": [" + pack + "]}").string();
    const auto workload = folder.write("workload.json", "{\"repeat\": 1E400, \"prompts\": []}").string();
    const std::string header = comfy::arbiter::header_json(comfy::arbiter::ArbiterConfig{}, 8).dump();
    const auto trace = folder.write("trace.jsonl", header + "\n{\"event\": \"tick\", \"x\": 1E400}\n").string();
    std::string big_header = header;
    big_header.replace(big_header.find("\"ledger_capacity\":8"), 19, "\"ledger_capacity\":4294967295");
    const auto big_ledger = folder.write("big-ledger.jsonl", big_header + "\n").string();
    std::string args;
    for (std::size_t total = 0; total <= std::min<std::size_t>(::sysconf(_SC_ARG_MAX), 6 << 20); total += 100'000) {
        args += (args.empty() ? "\"" : ", \"") + std::string(100'000, 'a') + "\"";
    }
    const auto long_args = folder.write("args.json", "{\"packs\": [{\"name\": \"big\", \"command\": " + worker +
                                                         ", \"args\": [" + args + "]}]}").string();
    const auto instance = test_instance("input");
    const std::string run = "run --instance " + instance + " --config ";
    const std::vector<BadRun> table = {
        // Before: each of these grew the supervisor by a GB a second, blocked forever,
        // overflowed the stack, aborted (exit 134) or answered without the file name.
        {"config /dev/zero", run + "/dev/zero", "/dev/zero: cannot read: expected a regular file, found a character device"},
        {"config a FIFO", run + fifo, ": cannot read: expected a regular file, found a FIFO"},
        {"config nested too deep", run + deep, deep + ": at line 1, column 65: expected arrays and objects nested"},
        {"config number out of range", run + huge_number, huge_number + ": at line 1, column 37: expected a number"},
        {"config command line past ARG_MAX", run + long_args, long_args + ": at /packs/0: expected a command, args"},
        {"workload /dev/zero", run + config + " --workload /dev/zero", "/dev/zero: cannot read: expected a regular file"},
        {"workload number out of range", run + config + " --workload " + workload, workload + ": at line 1, column 12"},
        {"replay /dev/zero", "replay /dev/zero", "/dev/zero: cannot read: expected a regular file"},
        {"replay a FIFO", "replay " + fifo, ": cannot read: expected a regular file, found a FIFO"},
        {"replay number out of range", "replay " + trace, trace + ": line 2: at character 24: expected a number"},
        {"replay ledger too large", "replay " + big_ledger, big_ledger + ": line 1: at /ledger_capacity: expected"},
        {"record into a missing folder", run + config + " --record " + (folder.path() / "missing/trace.jsonl").string(),
         "/missing/trace.jsonl: cannot open for writing: No such file or directory"},
    };
    for (const auto& row : table) {
        INFO(row.what);
        // Bounded, so that a regression fails here instead of taking the machine with it.
        const auto started = std::chrono::steady_clock::now();
        const auto result = run_supervisor("", folder, memory_limit_words(4096) + "timeout 30 ", row.arguments);
        CHECK(result.status == 2);
        CHECK_THAT(result.stderr_text, Contains(row.message));
        CHECK(std::count(result.stderr_text.begin(), result.stderr_text.end(), '\n') == 1);
        CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));
        CHECK(comfy::ipc::inspect_segment(comfy::ipc::segment_name(instance)).state == comfy::ipc::SegmentState::absent);
    }
}
