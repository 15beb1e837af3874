// Runs tests/host/bridge_checks.py as the ComfyUI host under a live supervisor, with packs
// of tests/packs in the `python` form of the config: each named check is one line of the
// host's ("bridge_checks: NAME passed"). Shared by the bridge's multi-process tests.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/supervisor_process.hpp"

namespace comfy::test {

// `pack`: a test pack's folder, or a group's list of them.
inline nlohmann::json python_pack_of(const std::string& name, const nlohmann::json& pack) {
    return {{"name", name},
            {"python", {{"pack", pack}, {"interpreter", PYTHON3_PATH}, {"comfyui", FAKE_COMFYUI}}},
            {"env", {{"PYTHONDONTWRITEBYTECODE", "1"}}},
            {"restart", {{"initial_backoff_ms", 50}}}};
}

inline nlohmann::json python_pack(const std::string& name, const std::string& folder) {
    return python_pack_of(name, std::string(TEST_PACKS) + "/" + folder);
}

// One entry whose packs, tests/packs' `folders`, run in one worker.
inline nlohmann::json pack_group(const std::string& name, const std::vector<std::string>& folders) {
    nlohmann::json paths = nlohmann::json::array();
    for (const auto& folder : folders) paths.push_back(std::string(TEST_PACKS) + "/" + folder);
    return python_pack_of(name, paths);
}

// `host`: more keys of the comfyui section.
inline nlohmann::json config_checking(const std::vector<std::string>& checks, const nlohmann::json& packs,
                                      const nlohmann::json& host) {
    nlohmann::json args = nlohmann::json::array({BRIDGE_CHECKS});
    for (const auto& check : checks) args.push_back(check);
    nlohmann::json config = memory_config_of(packs);
    config["comfyui"] = {{"command", PYTHON3_PATH},
                         {"args", args},
                         {"env", {{"PYTHONPATH", PARTICIPANT_PYTHONPATH}, {"PYTHONDONTWRITEBYTECODE", "1"}}}};
    config["comfyui"].update(host);
    return config;
}

// The hand-made wheels of tests/environments/wheelhouse.py (clashlib 1.0 and 2.0, numpy...)
// written into `folder`, as no package index is reachable; the folder.
inline std::filesystem::path make_wheelhouse(const std::filesystem::path& folder) {
    const auto made = run_and_capture(std::string(PYTHON3_PATH) + " -c 'import sys; sys.path.insert(0, sys.argv[1]); "
                                      "import wheelhouse; wheelhouse.make(sys.argv[2])' '" + WHEELHOUSE_DIR + "' '" +
                                      folder.string() + "' 2>&1");
    INFO(made.output);
    REQUIRE(made.status == 0);
    return folder;
}

// The row of `pack` in comfyctl workers' table, or "" when it has none.
inline std::string row_of(const std::string& table, const std::string& pack) {
    std::size_t start = 0;
    while (start < table.size()) {
        const std::size_t end = std::min(table.find('\n', start), table.size());
        const std::string line = table.substr(start, end - start);
        if (line.find("  " + pack + "  ") != std::string::npos) return line;
        start = end + 1;
    }
    return {};
}

inline nlohmann::json read_json(const std::filesystem::path& file) {
    std::ifstream text(file);
    return nlohmann::json::parse(text);
}

// Waits for the checks `supervisor` runs to end, stops it, and returns its log.
inline std::string finish_checks(SupervisorProcess& supervisor, const std::vector<std::string>& checks) {
    const bool done = eventually([&] { return supervisor.log().find("bridge_checks: checks done") != std::string::npos; },
                                 std::chrono::seconds(120));
    const auto log = supervisor.log();
    INFO(log);
    CHECK(supervisor.stop() == 0);
    REQUIRE(done);
    for (const auto& check : checks) CHECK_THAT(log, Catch::Matchers::Contains("bridge_checks: " + check + " passed"));
    return log;
}

// Runs the checks to their end, stops the supervisor, and returns its log.
inline std::string run_checks(const std::vector<std::string>& checks, const nlohmann::json& packs,
                              const nlohmann::json& host = nlohmann::json::object()) {
    SupervisorProcess supervisor(config_checking(checks, packs, host));
    return finish_checks(supervisor, checks);
}

}  // namespace comfy::test
