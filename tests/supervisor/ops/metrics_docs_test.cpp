// The metrics of a live supervisor: valid for Prometheus (promtool check metrics), every
// one described in docs/METRICS.md, and every one the Grafana dashboard queries real; every
// participant state in the Grafana timeline, the docs and the dashboard's colours.
#include <catch2/catch.hpp>

#include "shared/records.hpp"
#include "supervisor/ctl/segment_report.hpp"
#include "tests/support/http_client.hpp"
#include "tests/support/supervisor_process.hpp"

#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

using namespace comfy::test;
using nlohmann::json;

namespace {

const std::filesystem::path kSource = COMFY_SOURCE_DIR;
const std::string kOddModel = R"(a "quoted" \ model)";

// Every metric family a live supervisor with a pack and the ComfyUI-less default config
// emits, by its "# TYPE" line, and the exposition itself. The pack holds a model whose name
// needs escaping in a label, as its pack file names it.
struct Scrape {
    std::string text;
    std::set<std::string> families;
};

Scrape scrape_live_supervisor() {
    TempFolder packs("metrics");
    // The model stays loaded between the node's runs, which go on until the test stops them.
    const json holding = {{"nodes", {{"hold", {step_load(kOddModel, "1GiB"), step_compute(100)}}}}};
    json workload = workload_of({{node("solo", "hold")}});
    workload["repeat"] = 100000;
    const json config = {{"http", {{"listen", "127.0.0.1:0"}}},
                         {"device", {{"kind", "simulated"}, {"total_bytes", "24GiB"}}},
                         {"host", {{"budget_bytes", "64GiB"}}},
                         {"packs", {reference_pack(packs, "solo", holding)}}};
    SupervisorProcess supervisor(config, workload);
    REQUIRE(eventually([&] { return !supervisor.ledger().empty(); }, std::chrono::seconds(30)));
    const auto port = http_port(supervisor);
    REQUIRE(port);
    Scrape scrape;
    const auto answer = http_request(*port, "GET", "/metrics");
    REQUIRE(answer.status == 200);
    scrape.text = answer.body;
    supervisor.stop();  // the node it interrupts fails, as a prompt at shutdown does: its status says so
    std::istringstream lines(scrape.text);
    for (std::string line; std::getline(lines, line);) {
        std::smatch found;
        if (std::regex_match(line, found, std::regex("# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) [a-z]+"))) {
            scrape.families.insert(found[1].str());
        }
    }
    REQUIRE(scrape.families.size() > 10);
    return scrape;
}

// Names written as code (`name`) in docs/METRICS.md.
std::string metrics_page() {
    const auto page = read_file(kSource / "docs/METRICS.md");
    REQUIRE(!page.empty());
    return page;
}

bool documented(const std::string& page, const std::string& name) { return page.find("`" + name + "`") != std::string::npos; }

}  // namespace

TEST_CASE("a live supervisor's metrics pass promtool check metrics") {
    const std::string promtool = "/usr/bin/promtool";
    if (!std::filesystem::exists(promtool)) FAIL(promtool + " is missing: install Debian's prometheus (scripts/setup)");
    const auto scrape = scrape_live_supervisor();
    TempFolder folder("promtool");
    const auto file = folder.write("metrics.txt", scrape.text);
    const auto check = run_and_capture(promtool + " check metrics < " + file.string() + " 2>&1");
    INFO(check.output);
    CHECK(check.status == 0);
    CHECK(check.output.empty());
}

TEST_CASE("every metric the supervisor emits is described in docs/METRICS.md") {
    const auto scrape = scrape_live_supervisor();
    const auto page = metrics_page();
    for (const auto& family : scrape.families) {
        INFO(family);
        CHECK(documented(page, family));
    }
    CHECK(scrape.families.count("comfy_build_info") == 1);
    CHECK(scrape.families.count("comfy_host_available_bytes") == 1);
    CHECK(scrape.families.count("comfy_admission_wait_seconds") == 1);
    CHECK(scrape.text.find(R"(comfy_model_loaded_bytes{pack="solo",model_id="1",model="a \"quoted\" \\ model"} )"
                           "1073741824\n") != std::string::npos);
}

TEST_CASE("the Grafana dashboard is valid JSON and queries only metrics docs/METRICS.md describes") {
    const auto text = read_file(kSource / "deploy/grafana/comfy-supervisor.json");
    REQUIRE(!text.empty());
    const auto dashboard = json::parse(text);
    CHECK(dashboard["title"] == "comfy-supervisor");
    const auto page = metrics_page();
    std::set<std::string> queried;
    const std::regex metric_name("comfy_[a-z_]+");
    for (const auto& panel : dashboard["panels"]) {
        for (const auto& target : panel["targets"]) {
            const auto expr = target["expr"].get<std::string>();
            for (std::sregex_iterator it(expr.begin(), expr.end(), metric_name), end; it != end; ++it) {
                queried.insert(it->str());
            }
        }
    }
    REQUIRE(queried.size() > 10);
    for (auto name : queried) {
        INFO(name);
        // A histogram is documented by its family's name.
        for (const std::string suffix : {"_bucket", "_sum", "_count"}) {
            if (name.ends_with(suffix) && !documented(page, name)) name.resize(name.size() - suffix.size());
        }
        CHECK(documented(page, name));
    }
}

TEST_CASE("every participant state has its place in the Grafana timeline, the docs and the dashboard's colours") {
    const auto grafana = json::parse(read_file(kSource / "deploy/grafana/comfy-supervisor.json"));
    const json* timeline = nullptr;
    for (const auto& panel : grafana["panels"]) {
        if (panel["type"] == "state-timeline") timeline = &panel;
    }
    REQUIRE(timeline != nullptr);
    const auto expr = (*timeline)["targets"][0]["expr"].get<std::string>();
    const auto& mappings = (*timeline)["fieldConfig"]["defaults"]["mappings"][0]["options"];
    const auto page = metrics_page();
    const auto dashboard = read_file(kSource / "supervisor/ops/dashboard/dashboard.html");
    for (std::uint8_t state = 0; state < comfy::kParticipantStateCount; ++state) {
        const std::string name = comfy::ctl::state_name(state);
        INFO(name);
        // Its number in the timeline's query, and that number's text.
        std::smatch number;
        REQUIRE(std::regex_search(expr, number, std::regex("state=\"" + name + "\"\\} == 1\\) \\* ([0-9]+)")));
        REQUIRE(mappings.contains(number[1].str()));
        CHECK(mappings[number[1].str()]["text"].get<std::string>().starts_with(name));
        CHECK(documented(page, name));
        // A pill of its own colour: the pills' text is white, as the page's background is.
        CHECK(std::regex_search(dashboard, std::regex("\\.pill\\." + name + "[ ,{][^}]*background")));
    }
}
