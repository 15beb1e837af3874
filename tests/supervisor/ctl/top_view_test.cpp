// comfyctl top's frame at the terminal's width: the bar resized to what the columns leave
// (never cut at the edge), the node named where the supervisor knows its name, and the
// width taken from $COLUMNS where the terminal does not say it.
#include <catch2/catch.hpp>

#include "supervisor/ctl/top_view.hpp"

#include <sstream>
#include <vector>

using namespace comfy;
using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;

namespace {

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

// A host and two packs of long names, the second running a node the supervisor sent it.
ctl::SegmentReport report_of_three() {
    ctl::SegmentReport report;
    report.instance = "demo";
    report.device.total_bytes = 24 * kGiB;
    report.device.used_bytes = 12 * kGiB;
    report.device.free_bytes = 12 * kGiB;
    const std::vector<std::string> names{"host", "impact-pack-subpack", "video-helper-suite-long"};
    for (std::uint32_t slot = 0; slot < names.size(); ++slot) {
        ctl::WorkerRow worker;
        worker.slot = slot;
        worker.name = names[slot];
        worker.state = "ready";
        ctl::CensusRow census;
        census.slot = slot;
        census.name = names[slot];
        census.status = ctl::RecordStatus::ok;
        census.census.device_used_bytes = (slot + 1) * 2 * kGiB;
        report.workers.push_back(worker);
        report.census.push_back(census);
    }
    report.workers[2].last_node = "load_video_model";
    report.census[1].census.last_node = 7;  // a node it reports, by number alone
    return report;
}

std::vector<std::string> lines_of(const std::string& frame) {
    std::vector<std::string> lines;
    std::istringstream in(frame);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

// The participant rows: those after the heading "SLOT ...".
std::vector<std::string> rows_of(const std::string& frame) {
    const auto lines = lines_of(frame);
    std::vector<std::string> rows;
    bool table = false;
    for (const auto& line : lines) {
        if (line.find("SLOT") != std::string::npos) {
            table = true;
            continue;
        }
        if (table && !line.empty()) rows.push_back(line);
    }
    rows.pop_back();  // "q quits"
    return rows;
}

}  // namespace

TEST_CASE("top's bar takes the width the columns leave, whole, at any terminal width") {
    const auto report = report_of_three();
    std::size_t previous_bar = 0;
    for (const std::size_t width : {70, 80, 100, 160, 240}) {
        INFO("width " << width);
        const auto frame = ctl::top_frame(report, {std::nullopt, "12:00:00", width});
        for (const auto& line : lines_of(frame)) CHECK(line.size() <= width);
        const auto rows = rows_of(frame);
        REQUIRE(rows.size() == 3);
        for (const auto& row : rows) {
            // Each row ends in its whole bar, at the terminal's last column.
            CHECK_THAT(row, EndsWith("]"));
            CHECK(row.size() == width);
        }
        const std::size_t bar = rows[0].size() - rows[0].rfind('[');
        CHECK(bar > previous_bar);
        previous_bar = bar;
    }
    // Too narrow for any bar: none, rather than one cut at the edge.
    const auto narrow = rows_of(ctl::top_frame(report, {std::nullopt, "", 60}));
    for (const auto& row : narrow) CHECK(row.find('[') == std::string::npos);
}

TEST_CASE("top names the node a participant runs where the supervisor knows it") {
    const auto frame = ctl::top_frame(report_of_three(), {std::nullopt, "", 120});
    const auto rows = rows_of(frame);
    REQUIRE(rows.size() == 3);
    CHECK_THAT(rows[2], Contains("load_video_model"));
    CHECK_THAT(rows[1], Contains("#7"));
    CHECK_THAT(lines_of(frame)[3], Contains("NODE"));
}

TEST_CASE("top's width comes from COLUMNS when the terminal does not say it") {
    CHECK(ctl::columns_or("132", 100) == 132);
    CHECK(ctl::columns_or(nullptr, 100) == 100);
    for (const char* bad : {"", "wide", "0", "80x", "-3", "100000"}) {
        INFO(bad);
        CHECK(ctl::columns_or(bad, 100) == 100);
    }
}
