// The release messages across real processes: what the reference worker's compute steps
// leave behind (cast buffers, patch pins) is in its census and freed by exactly the
// releases upstream's executor would, the summary counts the bytes by kind, and a load
// that does not fit beside a node's leftovers fits once the node boundary freed them.
// Every figure checked is one the supervisor must have read before the workload ended:
// a release is checked through a later node of the same worker, whose ring delivers it first.
#include <catch2/catch.hpp>

#include "shared/memory_arithmetic.hpp"
#include "tests/support/supervisor_process.hpp"

#include <sstream>

using namespace comfy;
using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

json step_cast(const std::string& cast_buffer, const std::string& patch_pins = "0B") {
    return {{"op", "compute"}, {"ms", 1}, {"cast_buffer", cast_buffer}, {"patch_pins", patch_pins}};
}

// The summary's figure for one release kind: "node boundary 1.5 GiB (2)".
std::string freed_by(const std::string& kind, const std::string& bytes) { return kind + " " + bytes + " ("; }

// The last column of `pack`'s row in the summary's census: its cast buffers, as printed.
std::string cast_column(const std::string& output, const std::string& pack) {
    std::istringstream lines(output);
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream fields(line);
        std::string first;
        fields >> first;
        if (first != pack || !census_row(line, pack)) continue;
        const auto figure_start = line.find_last_of(' ', line.rfind(' ') - 1);
        return line.substr(figure_start + 1);
    }
    return {};
}

}  // namespace

TEST_CASE("the node boundary frees what that node left, and the census shows cast buffers until then") {
    TempFolder packs("rel");
    const json caster = {{"nodes",
                          {{"a", {step_cast("1GiB", "256MiB")}},
                           {"b", {step_cast("512MiB"), {{"op", "compute"}, {"ms", 600}}}},
                           {"c", {step_compute(1)}}}}};
    SupervisorProcess supervisor(memory_config_of(json::array({reference_pack(packs, "caster", caster)})),
                                 workload_of({{node("caster", "a"), node("caster", "b"), node("caster", "c")}}));
    // While b computes, a's buffer is gone and b's is held: exactly 512 MiB.
    const auto cast_now = [&] {
        const auto census = run_and_capture(comfyctl_binary() + " --instance " + supervisor.instance() + " census --json");
        if (census.status != 0) return std::uint64_t{0};
        const json document = json::parse(census.output);
        for (const auto& row : document["census"]) {
            if (row["name"] == "caster" && row["last_node"] == 1) return row["cast_buffer_bytes"].get<std::uint64_t>();
        }
        return std::uint64_t{0};
    };
    REQUIRE(eventually([&] { return cast_now() != 0; }, std::chrono::seconds(10)));
    CHECK(cast_now() == 512 * kMiB);
    CHECK(supervisor.wait() == 0);
    const auto output = supervisor.output();
    CHECK_THAT(output, Contains("prompts run        1 of 1 (0 failed)"));
    CHECK_THAT(output, Contains(freed_by("node boundary", "1.5 GiB")));
    CHECK_THAT(output, Contains(freed_by("epoch boundary", "0 B")));
    // Read at c's end: a's and b's leftovers, patch pins included, are gone.
    CHECK(census_figure(output, "caster", 1) == 0);
    CHECK(cast_column(output, "caster") == "0 B");
}

TEST_CASE("without node boundaries, the epoch boundary frees what earlier prompts left and keeps this one's") {
    TempFolder packs("rel");
    const json keeper = {{"node_boundary_release", false},
                         {"nodes",
                          {{"a", {step_cast("1GiB", "128MiB")}},
                           {"b", {step_cast("512MiB")}},
                           {"c", {step_cast("256MiB")}},
                           {"d", {step_compute(1)}}}}};
    SupervisorProcess supervisor(
        memory_config_of(json::array({reference_pack(packs, "keeper", keeper)})),
        workload_of({{node("keeper", "a")}, {node("keeper", "b")}, {node("keeper", "c"), node("keeper", "d")}}));
    CHECK(supervisor.wait() == 0);
    const auto output = supervisor.output();
    CHECK_THAT(output, Contains("prompts run        3 of 3 (0 failed)"));
    CHECK_THAT(output, Contains(freed_by("node boundary", "0 B") + "0)"));  // not asked for
    // Prompt 2's boundary freed a's 1 GiB, prompt 3's b's 512 MiB; c's is prompt 3's own.
    CHECK_THAT(output, Contains(freed_by("epoch boundary", "1.5 GiB")));
    const auto row = census_row(output, "keeper");
    REQUIRE(row);
    CHECK(row->figures[0] == 256 * 1048576.0);  // device: only c's cast buffer
    CHECK(cast_column(output, "keeper") == "256 MiB");
}

TEST_CASE("a full release frees the cast buffers with the models") {
    TempFolder packs("rel");
    const json keeper = {{"node_boundary_release", false},
                         {"nodes", {{"a", {step_load("m", "2GiB"), step_cast("1GiB")}}}}};
    json config = memory_config_of({reference_pack(packs, "keeper", keeper),
                             reference_pack(packs, "slow", {{"nodes", {{"t", {step_compute(2000)}}}}})},
                            json::object(), {{"idle_release_ms", 200}});
    config["limits"]["heartbeat_timeout_ms"] = 2000;  // the idle sweep runs every tenth of it
    SupervisorProcess supervisor(config, workload_of({{node("keeper", "a"), node("slow", "t")}}));
    CHECK(supervisor.wait() == 0);
    CHECK_THAT(supervisor.log(), Contains("keeper: full release freed 3.0 GiB"));
    CHECK_THAT(supervisor.output(), Contains(freed_by("full", "3.0 GiB")));
}

TEST_CASE("a load that does not fit beside a node's cast buffer fits once the node boundary freed it") {
    TempFolder packs("rel");
    // 12 GiB of cast buffer leaves 12 GiB free; a 10 GiB load needs 11 GiB plus its largest
    // tensor (an eighth) and the reserve. Nothing else is on the device to evict, so only the
    // release helps.
    const auto pack = [](bool boundary) {
        return json{{"node_boundary_release", boundary},
                    {"nodes", {{"cast", {step_cast("12GiB")}}, {"load", {step_load("big", "10GiB")}}}}};
    };
    const json workload = workload_of({{node("worker", "cast"), node("worker", "load")}});
    SECTION("with node boundary releases") {
        SupervisorProcess supervisor(memory_config_of(json::array({reference_pack(packs, "worker", pack(true))}), {{"no_fit", "refuse"}}), workload);
        CHECK(supervisor.wait() == 0);
        CHECK_THAT(supervisor.log(), Contains("worker: node boundary release freed 12 GiB"));
        CHECK_THAT(supervisor.log(), Contains("worker: a load of 10 GiB needs 13 GiB free and finds 24 GiB; it fits only "
                                              "because a boundary release before it freed 12 GiB (12 GiB free without it)"));
        CHECK_THAT(supervisor.output(), Contains("prompts run        1 of 1 (0 failed)"));
        CHECK(census_figure(supervisor.output(), "worker", 0) == 10 * kGiBf);
    }
    SECTION("without them, the same load is refused") {
        SupervisorProcess supervisor(memory_config_of(json::array({reference_pack(packs, "worker", pack(false))}), {{"no_fit", "refuse"}}),
                                     workload);
        CHECK(supervisor.wait() == 1);
        CHECK_THAT(supervisor.log(), Contains("loading big refused"));
        CHECK_THAT(supervisor.output(), Contains("prompts run        0 of 1 (1 failed)"));
    }
}
