// The dashboard in a real browser: the demo's config and workload under a live
// supervisor, the page loaded in headless Chromium (Debian's package, scripts/setup), its
// DOM checked for every participant and a chart of more than one point, and a screenshot
// kept as the test's artefact (build/test-artifacts/dashboard.png).
#include <catch2/catch.hpp>

#include "tests/support/http_client.hpp"
#include "tests/support/supervisor_process.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

using namespace comfy::test;
using nlohmann::json;

namespace {

const std::filesystem::path kExamples = COMFY_EXAMPLES_DIR;
const std::string kChromium = "/usr/bin/chromium";

json read_json(const std::filesystem::path& file) {
    std::ifstream in(file);
    REQUIRE(in);
    return json::parse(in);
}

// The demo's config with its paths made absolute (they are relative to examples/), the
// HTTP endpoints on a free port, and time-outs for a loaded machine.
json demo_config() {
    json demo = read_json(kExamples / "demo.json");
    const auto from_examples = [](const json& path) { return (kExamples / path.get<std::string>()).lexically_normal().string(); };
    demo["http"] = {{"listen", "127.0.0.1:0"}};
    demo["limits"]["heartbeat_timeout_ms"] = 20000;
    demo["limits"]["handshake_timeout_ms"] = 60000;
    demo["comfyui"]["working_directory"] = kExamples.string();
    demo["comfyui"]["checkout"] = from_examples(demo["comfyui"]["checkout"]);
    for (auto& pack : demo["packs"]) {
        if (pack.contains("python")) {
            pack["python"]["pack"] = from_examples(pack["python"]["pack"]);
        } else {
            pack["command"] = worker_binary();
        }
        pack["working_directory"] = kExamples.string();
    }
    return demo;
}

// Chromium, headless, on the page, its helpers waited for (reap_all.py); its output (with
// --dump-dom, the DOM after the page's scripts ran for 10 s of virtual time).
CommandRun chromium(const TempFolder& profile, const std::string& url, const std::string& action) {
    return run_and_capture("timeout -k 10 180 /usr/bin/python3 " REAP_ALL " " + kChromium +
                           " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run"
                           " --disable-crash-reporter --disable-breakpad --disable-extensions --mute-audio"
                           " --user-data-dir=" + profile.path().string() +
                           " --virtual-time-budget=10000 " + action + " " + url + " 2>/dev/null");
}

}  // namespace

TEST_CASE("the dashboard shows every participant and a memory chart in headless Chromium") {
    if (!std::filesystem::exists(kChromium)) FAIL(kChromium + " is missing: install Debian's chromium (scripts/setup)");
    json workload = read_json(kExamples / "workload.json");
    workload["repeat"] = 100000;  // running until the test stops it
    SupervisorProcess supervisor(demo_config(), workload);
    const auto port = http_port(supervisor, std::chrono::seconds(60));
    REQUIRE(port);
    const std::string base = "http://127.0.0.1:" + std::to_string(*port);

    std::vector<std::string> names{"host"};
    const json demo = read_json(kExamples / "demo.json");
    for (const auto& pack : demo["packs"]) names.push_back(pack["name"]);
    // Everyone up, and a history of at least three samples, before the page loads.
    const bool up = eventually(
        [&] {
            const auto census = http_request(*port, "GET", "/census");
            if (census.status != 200) return false;
            std::size_t running = 0;
            const auto report = json::parse(census.body);
            for (const auto& w : report["workers"]) running += w["state"] == "ready" || w["state"] == "busy";
            return running == names.size();
        },
        std::chrono::seconds(120));
    if (!up) FAIL("not every participant came up in 120 s; the supervisor's log:\n" << supervisor.log());
    REQUIRE(eventually(
        [&] {
            const auto history = http_request(*port, "GET", "/memory-history");
            return history.status == 200 && json::parse(history.body)["samples"].size() >= 3;
        },
        std::chrono::seconds(60)));

    TempFolder profile("chromium");
    const auto dom = chromium(profile, base + "/", "--dump-dom");
    INFO(dom.output.substr(0, 4000));
    REQUIRE(dom.status == 0);
    for (const auto& name : names) {
        INFO(name);
        CHECK(dom.output.find("<tr data-participant=\"" + name + "\">") != std::string::npos);
    }
    std::smatch points;
    REQUIRE(std::regex_search(dom.output, points, std::regex("id=\"history-chart\" data-points=\"([0-9]+)\"")));
    CHECK(std::stoi(points[1].str()) >= 2);
    CHECK(dom.output.find("data-series=\"used\"") != std::string::npos);
    CHECK(dom.output.find("class=\"bar\"") != std::string::npos);
    CHECK(dom.output.find("<li data-seq=") != std::string::npos);
    // The models on the device, by their names in the pack files (and the host's own).
    std::vector<std::string> models{"text-encoder"};
    for (const auto& file : std::filesystem::directory_iterator(kExamples / "packs")) {
        const json pack = read_json(file.path());
        for (const auto& [node, steps] : pack["nodes"].items()) {
            for (const auto& step : steps) {
                if (step.contains("model")) models.push_back(step["model"]);
            }
        }
    }
    CHECK(dom.output.find("<tr data-model=") != std::string::npos);
    CHECK(std::any_of(models.begin(), models.end(), [&](const std::string& model) {
        return dom.output.find("<td>" + model + "</td>") != std::string::npos;
    }));

    const std::filesystem::path artifacts = std::filesystem::path(COMFY_BUILD_DIR) / "test-artifacts";
    std::filesystem::create_directories(artifacts);
    const auto png = artifacts / "dashboard.png";
    std::filesystem::remove(png);
    const auto shot = chromium(profile, base + "/", "--window-size=1280,900 --screenshot=" + png.string());
    REQUIRE(shot.status == 0);
    REQUIRE(std::filesystem::exists(png));
    // A page with bars, a chart and tables compresses to tens of KiB; a blank one to a few.
    CHECK(std::filesystem::file_size(png) > 20000);
    CHECK(read_file(png).substr(1, 3) == "PNG");
    supervisor.stop();
}
