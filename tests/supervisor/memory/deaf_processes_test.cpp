// A deaf pack beside working ones (issue 20): a pack that registers many small models and
// never answers an eviction costs another pack's load one answer time-out in all, not one
// per model; it is marked where the operator looks, and kept or restarted as
// memory.deaf_participant says.
#include <catch2/catch.hpp>

#include "tests/support/supervisor_process.hpp"

#include <sstream>

using namespace comfy;
using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

constexpr int kAnswerTimeoutMs = 500;

// The lines of `log` that contain `text`.
std::size_t lines_with(const std::string& log, const std::string& text) {
    std::istringstream lines(log);
    std::size_t count = 0;
    for (std::string line; std::getline(lines, line);) count += line.find(text) != std::string::npos;
    return count;
}

// The filler registers 64 models of 1 MiB, then reads nothing more. The holder waits until
// the filler holds its memory, loads 12 GiB and computes; the loader then loads 12 GiB,
// which does not fit: the filler's models, the smallest, come first in the order, and the
// holder's model pays. `restarts`: how often the filler may be restarted.
json deaf_config(const TempFolder& packs, const std::string& policy, std::uint32_t restarts) {
    const json holder = {{"nodes", {{"load", {step_await_free_below("24544MiB"), step_load("big", "12GiB")}}}}};
    const json loader = {{"nodes", {{"load", {step_load("big", "12GiB"), step_compute(1000)}}}}};
    json filler = misbehaving_pack("filler", "deaf-filler");
    filler["args"] = {"deaf-filler", "64"};
    filler["restart"] = {{"max_restarts", restarts}};
    return memory_config_of({reference_pack(packs, "holder", holder), reference_pack(packs, "loader", loader), filler},
                            {{"answer_timeout_ms", kAnswerTimeoutMs}, {"deaf_participant", policy}});
}

json two_prompts() { return workload_of({{node("holder", "load")}, {node("loader", "load")}}); }

}  // namespace

TEST_CASE("a deaf pack of many small models costs another pack's load one answer time-out, and is marked") {
    TempFolder packs("deaf");
    SupervisorProcess supervisor(deaf_config(packs, "keep", 0), two_prompts());
    REQUIRE(supervisor.wait_for_state("filler", ParticipantState::ready, std::chrono::seconds(60)));
    const auto slot = supervisor.participant("filler")->slot;
    // Its record says so while it lives, for comfyctl and the metrics.
    CHECK(supervisor.wait_for(
        [](const std::vector<Participant>& table) {
            return std::any_of(table.begin(), table.end(), [](const Participant& p) { return p.name == "filler" && p.deaf; });
        },
        std::chrono::seconds(60)));
    CHECK(supervisor.wait() == 0);
    const auto log = supervisor.log();
    // One time-out, not one per model: with the fix taken out, the loader waited on 64.
    const std::string timeout =
        "owner filler (slot " + std::to_string(slot) + ", generation 1) did not answer within 500 ms";
    CHECK(lines_with(log, timeout) == 1);
    CHECK_THAT(log, Contains("filler: deaf: it let a command go unanswered for 500 ms (memory.answer_timeout_ms); its 64 "
                             "model(s) (64 MiB loaded) are passed over until it answers (memory.deaf_participant "
                             "\"keep\"); comfyctl restart filler gets their memory back"));
    CHECK(lines_with(log, "filler: deaf:") == 1);
    const auto output = supervisor.output();
    CHECK_THAT(output, Contains("prompts run        2 of 2 (0 failed)"));
    CHECK_THAT(output, Contains("deaf               1 time(s)") && Contains("63 eviction(s) passed over"));
    // The holder's model paid for the load; the filler kept its 64 MiB.
    CHECK(census_figure(output, "holder", 0) < 12 * kGiBf);
    CHECK(census_figure(output, "filler", 0) == 64.0 * 1024 * 1024);
}

TEST_CASE("under memory.deaf_participant restart, a deaf pack is restarted and its memory comes back") {
    TempFolder packs("deaf");
    SupervisorProcess supervisor(deaf_config(packs, "restart", 5), two_prompts());
    REQUIRE(supervisor.wait_for_state("filler", ParticipantState::ready, std::chrono::seconds(60)));
    // Its second life: the first was ended for its deafness.
    CHECK(supervisor.wait_for(
        [](const std::vector<Participant>& table) {
            return std::any_of(table.begin(), table.end(),
                               [](const Participant& p) { return p.name == "filler" && p.generation >= 2; });
        },
        std::chrono::seconds(60)));
    CHECK(supervisor.wait() == 0);
    const auto log = supervisor.log();
    CHECK_THAT(log, Contains("filler: deaf: it let a command go unanswered for 500 ms (memory.answer_timeout_ms); "
                             "restarting it so that its 64 model(s) (64 MiB loaded) come back "
                             "(memory.deaf_participant \"restart\")"));
    CHECK_THAT(log, Contains(": deaf (memory.deaf_participant \"restart\")"));
    CHECK(lines_with(log, "did not answer within 500 ms") == 1);
    CHECK_THAT(supervisor.output(), Contains("prompts run        2 of 2 (0 failed)"));
}
