// A worker that floods the supervisor with requests or reports, beside a well-behaved
// pack that holds a model: the supervisor survives, the flood is stopped or refused with
// a bounded number of log lines, and the other pack works on.
#include <catch2/catch.hpp>

#include "tests/support/supervisor_process.hpp"

#include <algorithm>
#include <sstream>

using namespace comfy;
using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

json flooder(const std::string& mode) { return misbehaving_pack("flooder", mode); }

// The log's lines that contain `text`.
std::size_t lines_with(const std::string& log, const std::string& text) {
    std::istringstream lines(log);
    std::size_t count = 0;
    for (std::string line; std::getline(lines, line);) count += line.find(text) != std::string::npos;
    return count;
}

}  // namespace

TEST_CASE("an admission flood behind another pack's model stops the flooder and the other pack gets its admission") {
    TempFolder packs("flood");
    // The holder loads a model and computes (busy) while the flood comes; then loads again.
    const json holder = {{"nodes",
                          {{"work", {step_load("big", "12GiB"), step_compute(4000)}},
                           {"again", {step_load("small", "2GiB")}}}}};
    const json config = memory_config_of({reference_pack(packs, "holder", holder), flooder("admission-flood")},
                                         {{"answer_timeout_ms", 1000}});
    SupervisorProcess supervisor(config, workload_of({{node("holder", "work"), node("holder", "again")}}));
    CHECK(supervisor.wait() == 0);
    const auto log = supervisor.log();
    CHECK_THAT(log, Contains("flooder: stopping pid") &&
                        Contains("sent admission_request with 16 requests outstanding, past "
                                 "limits.outstanding_requests (16); a participant waits for its answers before it asks again"));
    CHECK_THAT(supervisor.output(), Contains("prompts run        1 of 1 (0 failed)"));
    CHECK(census_figure(supervisor.output(), "holder", 0) >= 2 * kGiBf);
    // Its 20,000 requests made a few lines, not one each.
    CHECK(lines_with(log, "slot 2") + lines_with(log, "flooder") < 60);
}

TEST_CASE("a worker that asks without taking its answers is stopped and the other pack works on") {
    TempFolder packs("flood");
    const json worker = {{"nodes", {{"load", {step_compute(500), step_load("m", "2GiB")}}}}};
    SupervisorProcess supervisor(memory_config_of({reference_pack(packs, "steady", worker), flooder("answer-flood")}),
                                 workload_of({{node("steady", "load")}}));
    CHECK(supervisor.wait() == 0);
    const auto log = supervisor.log();
    // Answered at once, its requests wait in its outbox: they count as outstanding.
    CHECK_THAT(log, Contains("flooder: stopping pid") && Contains("past limits.outstanding_requests (16)"));
    CHECK_THAT(supervisor.output(), Contains("prompts run        1 of 1 (0 failed)"));
    CHECK(census_figure(supervisor.output(), "steady", 0) == 2 * kGiBf);
    CHECK(lines_with(log, "flooder") < 10);
}

TEST_CASE("a worker that ends node after node without taking the releases is stopped") {
    TempFolder packs("flood");
    const json worker = {{"nodes", {{"load", {step_compute(500), step_load("m", "2GiB")}}}}};
    SupervisorProcess supervisor(memory_config_of({reference_pack(packs, "steady", worker), flooder("node-flood")}),
                                 workload_of({{node("steady", "load")}}));
    CHECK(supervisor.wait() == 0);
    const auto log = supervisor.log();
    CHECK_THAT(log, Contains("flooder: stopping pid") &&
                        Contains("sent node_finished with 16 requests outstanding, past limits.outstanding_requests (16)"));
    CHECK_THAT(supervisor.output(), Contains("prompts run        1 of 1 (0 failed)"));
    CHECK(census_figure(supervisor.output(), "steady", 0) == 2 * kGiBf);
}

TEST_CASE("a ledger flood is held to its quota and the other pack's model is tracked with few log lines") {
    TempFolder packs("flood");
    const json holder = {{"nodes", {{"load", {step_compute(1500), step_load("m", "1GiB"), step_compute(3000)}}}}};
    SupervisorProcess supervisor(memory_config_of({reference_pack(packs, "holder", holder), flooder("ledger-flood")}),
                                 workload_of({{node("holder", "load")}}));
    // Two participants share the 4,096 rows: the flooder gets its 2,048, the holder its model.
    const auto rows_of = [&](std::uint32_t slot) {
        const auto ledger = supervisor.ledger();
        return std::count_if(ledger.begin(), ledger.end(), [&](const LedgerRecord& r) { return r.owner_slot == slot; });
    };
    CHECK(eventually([&] { return rows_of(1) == 1; }, std::chrono::seconds(20)));
    CHECK(rows_of(2) == 2048);
    // Refused, not stopped: a report past the quota is not a broken protocol.
    const auto flooding = supervisor.participant("flooder");
    REQUIRE(flooding);
    CHECK(flooding->generation == 1);
    CHECK(flooding->state == ParticipantState::ready);
    CHECK(supervisor.wait() == 0);
    // 17,952 models not tracked: 20 lines a window, and a count of the rest when it ends.
    const auto log = supervisor.log();
    const std::size_t logged = lines_with(log, "is not tracked");
    std::size_t windows = 0;
    std::size_t suppressed = 0;
    std::istringstream lines(log);
    const std::string summary = "flooder: ";
    for (std::string line; std::getline(lines, line);) {
        if (line.find("more lines like this suppressed in the last 10 s (ledger reports)") == std::string::npos) continue;
        ++windows;
        suppressed += std::stoul(line.substr(line.find(summary) + summary.size()));
    }
    CHECK(windows >= 1);
    CHECK(logged <= 20 * windows);
    CHECK(logged + suppressed == 20'000 - 2048);
}
