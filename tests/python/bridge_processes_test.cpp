// The supervisor's part in node calls, end to end: a host and Python packs that are
// probes (tests/host/bridge_probe.py) report what their control sockets bring. The host
// hears of every Python pack first, then each pack's life is paired with the host's: a
// call channel that works both ways, the pack's arena read-only to the host, and an arena
// of the host's for that pack life alone, writable by the host and read-only to the pack;
// a pack's death, restart and failure reach the host; a host's next life hears of the
// packs again and is paired with the live ones; a participant that does not bridge gets
// none of it; one that does not read its control socket is stopped.
#include <catch2/catch.hpp>

#include "tests/support/supervisor_process.hpp"

#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <set>
#include <sstream>

using namespace comfy;
using namespace comfy::test;
using nlohmann::json;

namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kDefaultArena = std::uint64_t{2} << 30;
// What the host is told of the packs' messages to the browser: the config's comfyui
// browser_messages, its bytes a second the default.
const json kBrowserMessages = {{"max_bytes", 64 * 1024}, {"per_second", 20}, {"bytes_per_second", 16 * kMiB}};

// Every line of a probe's report, parsed.
std::vector<json> report_of(const std::filesystem::path& file) {
    std::vector<json> records;
    std::istringstream lines(read_file(file));
    std::string line;
    while (std::getline(lines, line)) {
        if (!line.empty()) records.push_back(json::parse(line));
    }
    return records;
}

// The records that life `generation` of a probe wrote.
std::vector<json> life_of(const std::vector<json>& records, const std::string& generation) {
    std::vector<json> life;
    for (const auto& record : records) {
        if (record.value("generation", "") == generation) life.push_back(record);
    }
    return life;
}

std::vector<json> events_of(const std::vector<json>& records) {
    std::vector<json> events;
    for (const auto& record : records) {
        if (record.contains("event")) events.push_back(record);
    }
    return events;
}

// The first record of `records` for which `match` holds, or null.
json first_of(const std::vector<json>& records, const std::function<bool(const json&)>& match) {
    for (const auto& record : records) {
        if (match(record)) return record;
    }
    return nullptr;
}

json event_named(const std::vector<json>& records, const std::string& name, const std::string& pack = {},
                 int generation = 0) {
    return first_of(records, [&](const json& record) {
        if (!record.contains("event")) return false;
        const json& event = record["event"];
        return event["event"] == name && (pack.empty() || event.value("pack", "") == pack) &&
               (generation == 0 || event.value("generation", 0) == generation);
    });
}

json call_with(const std::vector<json>& records, const std::string& peer, int generation) {
    return first_of(records, [&](const json& record) {
        return record.value("call", "") == peer && record.value("peer_generation", 0) == generation;
    });
}

// What a pack's life `generation` recorded of its call with the host.
json call_of_life(const std::vector<json>& records, const std::string& generation) {
    return first_of(records, [&](const json& record) {
        return record.contains("call") && record.value("generation", "") == generation;
    });
}

json start_of(const std::vector<json>& records, const std::string& generation) {
    return first_of(records, [&](const json& record) {
        return record.contains("start") && record.value("generation", "") == generation;
    });
}

enum class Role { reader, writer };

// What a side must see of an arena handed to it: the size and seals the supervisor made it
// with, and what its role allows. A reader's descriptor is read-only: it maps privately but
// never shared and writable. The host writes the arena made for one pack life.
void check_arena(const json& fd, std::uint64_t bytes, Role role) {
    INFO(fd.dump());
    const bool writer = role == Role::writer;
    CHECK(fd["kind"] == "file");
    CHECK(fd["access"] == (writer ? "read-write" : "read-only"));
    CHECK(fd["size"] == bytes);
    CHECK(fd["seals"] == json::array({"grow", "seal", "shrink"}));
    CHECK(fd["shared_writable"] == (writer ? "mapped" : "refused: Permission denied"));
    CHECK(fd["private"] == "mapped");
}

void check_call_end(const json& fd) {
    INFO(fd.dump());
    CHECK(fd["kind"] == "socket");
    CHECK(fd["type"] == 1);  // SOCK_STREAM
    CHECK(fd["access"] == "read-write");
}

// An executable script in `folder` that runs the probe as `role`, passing on its
// arguments: the "python" form's interpreter, so the probe sees the command line the
// supervisor makes.
std::string probe_interpreter(const TempFolder& folder, const std::string& name, const std::string& role,
                              const std::filesystem::path& report) {
    const auto file = folder.write(name, "#!/bin/sh\nexec " + std::string(PYTHON3_PATH) + " " + BRIDGE_PROBE +
                                             " --role " + role + " --report " + report.string() + " \"$@\"\n");
    std::filesystem::permissions(file, static_cast<std::filesystem::perms>(0755));
    return file.string();
}

std::string pack_folder(const TempFolder& folder, const std::string& name) {
    std::filesystem::create_directories(folder.path() / name);
    folder.write(name + "/__init__.py", "NODE_CLASS_MAPPINGS = {}\n");
    return (folder.path() / name).string();
}

}  // namespace

TEST_CASE("the host hears of each Python pack's lives and shares a call channel and arenas with each") {
    TempFolder folder("bridge");
    const auto host_report = folder.path() / "host.jsonl";
    const auto alpha_report = folder.path() / "alpha.jsonl";
    const auto plain_report = folder.path() / "plain.jsonl";
    std::filesystem::create_directories(folder.path() / "checkout");
    std::filesystem::create_directories(folder.path() / "other-checkout");
    const auto exit78 =
        folder.write("exit78", "#!/bin/sh\necho 'cannot import broken_pack: no module named x' >&2\nexit 78\n");
    std::filesystem::permissions(exit78, static_cast<std::filesystem::perms>(0755));
    const std::string alpha_pack = pack_folder(folder, "alpha_pack");
    const std::string broken_pack = pack_folder(folder, "broken_pack");

    json config = memory_config_of(json::array(
        {{{"name", "alpha"},
          {"python", {{"pack", alpha_pack}, {"interpreter", probe_interpreter(folder, "alpha-python", "pack", alpha_report)},
                      {"arena_bytes", "16 MiB"}}},
          {"env", {{"PYTHONPATH", "/extra"}, {"PYTHONDONTWRITEBYTECODE", "1"}}},
          {"restart", {{"initial_backoff_ms", 50}}}},
         {{"name", "broken"},
          {"python", {{"pack", broken_pack}, {"interpreter", exit78.string()},
                      {"comfyui", (folder.path() / "other-checkout").string()}}}},
         {{"name", "plain"},
          {"command", PYTHON3_PATH},
          {"args", {BRIDGE_PROBE, "--role", "plain", "--report", plain_report.string()}},
          {"env", {{"PYTHONPATH", PARTICIPANT_PYTHONPATH}, {"PYTHONDONTWRITEBYTECODE", "1"}}}}}));
    config["comfyui"] = {{"command", PYTHON3_PATH},
                         {"args", {BRIDGE_PROBE, "--role", "host", "--report", host_report.string()}},
                         {"env", {{"PYTHONPATH", PARTICIPANT_PYTHONPATH}, {"PYTHONDONTWRITEBYTECODE", "1"}}},
                         {"checkout", (folder.path() / "checkout").string()},
                         {"browser_messages", {{"max_bytes", "64 KiB"}, {"per_second", 20}}}};
    SupervisorProcess supervisor(config);

    // The first lives: alpha paired and called across, broken paired, exited and failed.
    const bool first_lives = eventually(
        [&] {
            const auto host = report_of(host_report);
            return !call_with(host, "alpha", 1).is_null() && !event_named(host, "pack_failed", "broken").is_null() &&
                   !call_of_life(report_of(alpha_report), "1").is_null();
        },
        std::chrono::seconds(30));
    INFO(supervisor.log());
    INFO(read_file(host_report));
    INFO(read_file(alpha_report));
    REQUIRE(first_lives);

    // Alpha's worker killed: its exit reaches the host, and its next life is paired anew.
    const auto alpha = supervisor.participant("alpha");
    REQUIRE(alpha);
    REQUIRE(alpha->generation == 1);
    REQUIRE(::kill(alpha->pid, SIGKILL) == 0);
    const bool second_life = eventually(
        [&] {
            return !call_with(report_of(host_report), "alpha", 2).is_null() &&
                   !call_of_life(report_of(alpha_report), "2").is_null();
        },
        std::chrono::seconds(30));
    REQUIRE(second_life);

    // The host killed: its next life hears of the packs again, and is paired with alpha's
    // live second life at once.
    REQUIRE(supervisor.wait_for([](const auto& table) {
        for (const auto& p : table) {
            if (p.name == "alpha" && p.generation == 2 && p.state == ParticipantState::ready) return true;
        }
        return false;
    }));
    const auto first_host = supervisor.participant("host");
    REQUIRE(first_host);
    REQUIRE(::kill(first_host->pid, SIGKILL) == 0);
    const bool second_host = eventually(
        [&] {
            return !call_with(life_of(report_of(host_report), "2"), "alpha", 2).is_null() &&
                   !first_of(report_of(alpha_report), [](const json& r) {
                        return r.value("call", "") == "host" && r.value("peer_generation", 0) == 2;
                    }).is_null();
        },
        std::chrono::seconds(30));
    REQUIRE(eventually([&] { return !report_of(plain_report).empty(); }, std::chrono::seconds(30)));
    CHECK(supervisor.stop() == 0);
    REQUIRE(second_host);

    const auto host = report_of(host_report);
    const auto alpha_records = report_of(alpha_report);

    {  // what the host saw
        const json start = start_of(host, "1");
        REQUIRE_FALSE(start.is_null());
        CHECK(start["start"]["stray"] == json::array());
        // No arena of its own: one per pack life, handed over with each pairing.
        CHECK(start["start"]["variables"]["COMFY_SV_ARENA_FD"].is_null());
        CHECK(start["start"]["variables"]["COMFY_SV_ARENA_BYTES"].is_null());
        CHECK(start["start"]["own_arena"].is_null());

        // The packs first, before any pairing; states as comfyctl names them (the host is
        // started first, so neither pack has started yet).
        const auto events = events_of(host);
        REQUIRE_FALSE(events.empty());
        CHECK(events[0]["event"] ==
              json({{"event", "packs"},
                    {"packs", json::array({{{"name", "alpha"}, {"state", "empty"},
                                            {"folders", json::array({alpha_pack})}, {"cancel_grace_ms", 3000}},
                                           {{"name", "broken"}, {"state", "empty"},
                                            {"folders", json::array({broken_pack})}, {"cancel_grace_ms", 3000}}})},
                    {"browser_messages", kBrowserMessages}}));
        CHECK(events[0]["fds"] == json::array());

        for (const int generation : {1, 2}) {
            INFO("alpha generation " << generation);
            const json started = event_named(host, "pack_started", "alpha", generation);
            REQUIRE_FALSE(started.is_null());
            REQUIRE(started["fds"].size() == 3);
            check_call_end(started["fds"][0]);
            check_arena(started["fds"][1], 16 * kMiB, Role::reader);
            check_arena(started["fds"][2], kDefaultArena, Role::writer);
            const json call = call_with(host, "alpha", generation);
            CHECK(call["answer"] == "pong ping alpha " + std::to_string(generation));
            CHECK(call["peer_arena"] == "arena of pack generation " + std::to_string(generation));
            CHECK(call["own_arena"] == "arena of host generation 1 for alpha generation " + std::to_string(generation));
        }
        CHECK(event_named(host, "pack_exited", "alpha", 1)["event"] ==
              json({{"event", "pack_exited"}, {"pack", "alpha"}, {"generation", 1}, {"status", -1}, {"signal", 9},
                    {"reason", "killed by SIGKILL"}, {"restarts", true}}));

        // broken was paired at its spawn, then exited with 78 and was marked failed.
        CHECK_FALSE(event_named(host, "pack_started", "broken", 1).is_null());
        CHECK(event_named(host, "pack_exited", "broken", 1)["event"] ==
              json({{"event", "pack_exited"}, {"pack", "broken"}, {"generation", 1}, {"status", 78}, {"signal", 0},
                    {"reason", "exited with status 78"}, {"restarts", false}}));
        CHECK(event_named(host, "pack_failed", "broken")["event"] ==
              json({{"event", "pack_failed"},
                    {"pack", "broken"},
                    {"reason", "it exited with status 78 (it cannot run as configured: \"cannot import broken_pack: no "
                               "module named x\"); not restarting until an operator asks (comfyctl retry broken)"}}));
        CHECK_THAT(supervisor.log(), Catch::Matchers::Contains("broken: failed: it exited with status 78"));
    }

    {  // what the host's second life saw: the packs as they are now, then alpha's live life
        const auto second = life_of(host, "2");
        const auto events = events_of(second);
        REQUIRE(events.size() >= 2);
        CHECK(events[0]["event"] ==
              json({{"event", "packs"},
                    {"packs", json::array({{{"name", "alpha"}, {"state", "ready"},
                                            {"folders", json::array({alpha_pack})}, {"cancel_grace_ms", 3000}},
                                           {{"name", "broken"}, {"state", "failed"},
                                            {"folders", json::array({broken_pack})}, {"cancel_grace_ms", 3000}}})},
                    {"browser_messages", kBrowserMessages}}));
        CHECK(events[1]["event"] == json({{"event", "pack_started"}, {"pack", "alpha"}, {"generation", 2}}));
        REQUIRE(events[1]["fds"].size() == 3);
        check_arena(events[1]["fds"][1], 16 * kMiB, Role::reader);
        check_arena(events[1]["fds"][2], kDefaultArena, Role::writer);
        CHECK(call_with(second, "alpha", 2)["peer_arena"] == "arena of pack generation 2");
        CHECK(start_of(second, "2")["start"]["stray"] == json::array());
    }

    {  // what alpha's two lives saw
        for (const int generation : {1, 2}) {
            INFO("alpha generation " << generation);
            const json start = start_of(alpha_records, std::to_string(generation));
            REQUIRE_FALSE(start.is_null());
            // The command line and PYTHONPATH the supervisor made from the python form.
            // Its name and the config's file last, for the worker's messages.
            const json& argv = start["start"]["argv"];
            REQUIRE(argv.size() == 10);
            CHECK(json(std::vector<json>(argv.begin(), argv.begin() + 9)) ==
                  json::array({"-m", "comfy_supervisor.pack_worker", "--pack", alpha_pack, "--comfyui",
                               (folder.path() / "checkout").string(), "--name", "alpha", "--config"}));
            CHECK(argv[9].get<std::string>().ends_with("/config.json"));
            CHECK(start["start"]["pythonpath"] == std::string(PARTICIPANT_PYTHONPATH) + ":/extra");
            CHECK(start["start"]["stray"] == json::array());
            CHECK(start["start"]["variables"]["COMFY_SV_ARENA_BYTES"] == std::to_string(16 * kMiB));
            const json& own = start["start"]["own_arena"];
            CHECK(own["size"] == 16 * kMiB);
            CHECK(own["access"] == "read-write");
            CHECK(own["seals"] == json::array({"grow", "seal", "shrink"}));
            CHECK(own["allocated_bytes"] <= 64 * 1024);  // sparse: only the page written
        }
        // Each life hears of the host's first life, with its arena; the second life hears
        // of the host's second life too.
        const auto first_events = events_of(life_of(alpha_records, "1"));
        const auto second_events = events_of(life_of(alpha_records, "2"));
        REQUIRE(first_events.size() >= 1);
        REQUIRE(second_events.size() == 2);
        for (const json& heard : {first_events[0], second_events[0], second_events[1]}) {
            INFO(heard.dump());
            REQUIRE(heard["fds"].size() == 2);
            check_call_end(heard["fds"][0]);
            check_arena(heard["fds"][1], kDefaultArena, Role::reader);
        }
        CHECK(first_events[0]["event"] == json({{"event", "host_started"}, {"generation", 1}}));
        CHECK(second_events[0]["event"] == json({{"event", "host_started"}, {"generation", 1}}));
        CHECK(second_events[1]["event"] == json({{"event", "host_started"}, {"generation", 2}}));
        for (const int generation : {1, 2}) {
            const json call = call_of_life(alpha_records, std::to_string(generation));
            CHECK(call["asked"] == "ping alpha " + std::to_string(generation));
            CHECK(call["peer_arena"] == "arena of host generation 1 for alpha generation " + std::to_string(generation));
        }
        const json with_second_host = first_of(alpha_records, [](const json& r) {
            return r.value("call", "") == "host" && r.value("peer_generation", 0) == 2;
        });
        CHECK(with_second_host["asked"] == "ping alpha 2");
        CHECK(with_second_host["peer_arena"] == "arena of host generation 2 for alpha generation 2");

        // Each pack life is handed the very arena the host writes for it, and no other
        // life, nor another pack, is handed that one.
        const auto host_second_life = life_of(host, "2");
        const std::vector<std::pair<json, json>> pairings{
            {event_named(host, "pack_started", "alpha", 1), first_events[0]},
            {event_named(host, "pack_started", "alpha", 2), second_events[0]},
            {event_named(host_second_life, "pack_started", "alpha", 2), second_events[1]}};
        std::set<std::uint64_t> handed;
        for (const auto& [to_host, to_pack] : pairings) {
            const std::uint64_t inode = to_host["fds"][2]["inode"];
            CHECK(to_pack["fds"][1]["inode"] == inode);
            handed.insert(inode);
        }
        handed.insert(event_named(host, "pack_started", "broken", 1)["fds"][2]["inode"].get<std::uint64_t>());
        CHECK(handed.size() == 4);
    }

    {  // what the pack that does not bridge saw
        // A pack given by command does not bridge: no variables, no descriptors beyond its own.
        const auto plain = report_of(plain_report);
        REQUIRE_FALSE(plain.empty());
        CHECK(plain[0]["start"]["variables"] == json({{"COMFY_SV_ARENA_BYTES", nullptr}, {"COMFY_SV_ARENA_FD", nullptr},
                                                      {"COMFY_SV_BRIDGE_FD", nullptr}}));
        CHECK(plain[0]["start"]["stray"] == json::array());
        CHECK(plain[0]["start"]["own_arena"].is_null());
        CHECK(events_of(plain).empty());
    }
}

TEST_CASE("a host that does not read its control socket is stopped once the socket is full, and restarted") {
    TempFolder folder("bridge");
    std::filesystem::create_directories(folder.path() / "checkout");
    // A pack that dies at once and is restarted at once: two events (with descriptors) for
    // the host at each life, until its socket is full.
    const auto exit1 = folder.write("exit1", "#!/bin/sh\nexit 1\n");
    std::filesystem::permissions(exit1, static_cast<std::filesystem::perms>(0755));
    json config = memory_config_of(json::array(
        {{{"name", "flapper"},
          {"python", {{"pack", pack_folder(folder, "flapper_pack")}, {"interpreter", exit1.string()}}},
          {"restart", {{"initial_backoff_ms", 0}, {"max_backoff_ms", 0}, {"max_restarts", 1000}, {"window_ms", 600000}}}}}));
    config["comfyui"] = {{"command", PYTHON3_PATH},
                         {"args", {BRIDGE_PROBE, "--role", "host", "--deaf", "--report",
                                   (folder.path() / "host.jsonl").string()}},
                         {"env", {{"PYTHONPATH", PARTICIPANT_PYTHONPATH}, {"PYTHONDONTWRITEBYTECODE", "1"}}},
                         {"checkout", (folder.path() / "checkout").string()}};
    SupervisorProcess supervisor(config);
    const bool stopped = eventually(
        [&] { return supervisor.log().find("host: stopping pid") != std::string::npos; }, std::chrono::seconds(60));
    const bool restarted = stopped && supervisor.wait_for([](const auto& table) {
        for (const auto& p : table) {
            if (p.name == "host" && p.generation >= 2) return true;
        }
        return false;
    });
    CHECK(supervisor.stop() == 0);
    const auto log = supervisor.log();
    INFO(log.substr(0, 4000));
    REQUIRE(stopped);
    CHECK_THAT(log, Catch::Matchers::Contains(": does not read its bridge control socket"));
    CHECK_THAT(log, Catch::Matchers::Contains("(does not read its bridge control socket)"));
    CHECK(restarted);
}

TEST_CASE("a pack in the python form runs the real pack worker on its folder with the checkout's comfy package") {
    // No host: the pack worker joins and describes its nodes all the same.
    json config = memory_config_of(json::array(
        {{{"name", "example"},
          {"python", {{"pack", std::string(TEST_PACKS) + "/example_pack"}, {"interpreter", PYTHON3_PATH},
                      {"comfyui", FAKE_COMFYUI}, {"arena_bytes", "64 MiB"}}},
          {"env", {{"PYTHONDONTWRITEBYTECODE", "1"}}}}}));
    SupervisorProcess supervisor(config);
    const bool described = eventually(
        [&] { return supervisor.log().find("pack_worker: example_pack: 2 node classes") != std::string::npos; },
        std::chrono::seconds(20));
    const bool ready = described && supervisor.wait_for_state("example", ParticipantState::ready);
    CHECK(supervisor.stop() == 0);
    INFO(supervisor.log());
    CHECK(described);
    CHECK(ready);
}
