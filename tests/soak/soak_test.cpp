// The soak's own parts: its reading of the supervisor's log and summary (the lines as the
// supervisor writes them), its ledger check, and the fault plan a seed names.
#include <catch2/catch.hpp>

#include "tests/soak/fault_plan.hpp"
#include "tests/soak/ledger_check.hpp"
#include "tests/soak/summary_reader.hpp"
#include "tests/soak/supervisor_log.hpp"

#include <set>

using namespace comfy;
using namespace comfy::soak;

TEST_CASE("the soak reads the log lines it acts on and checks, and only those") {
    const auto line = parse_log_line(
        "2026-11-30T21:40:01.234Z warn  comfy-supervisor [  12.635] video: worker pid 9584 (generation 3) killed by SIGKILL");
    REQUIRE(line);
    CHECK(line->seconds == Approx(12.635));
    const auto death = parse_death(line->text);
    REQUIRE(death);
    CHECK(death->name == "video");
    CHECK(death->pid == 9584);
    CHECK(death->generation == 3);
    CHECK(death->how == "killed by SIGKILL");
    CHECK_FALSE(is_timing_verdict(death->how));
    const auto host = parse_death("host: pid 12 (generation 1) killed by SIGTERM (hung: no heartbeat for 2000 ms)");
    REQUIRE(host);
    CHECK(host->name == "host");
    CHECK(is_timing_verdict(host->how));
    CHECK(parse_death("sdxl: worker pid 5 (generation 2) exited with status 2"));
    CHECK_FALSE(parse_death("video: spawned pid 9606 (generation 2)"));
    CHECK_FALSE(parse_death("hostile-census-garbage: stopping pid 5: its census is unreadable"));
    CHECK_FALSE(parse_log_line(
        "2026-11-30T21:40:01.240Z info  video: comfy-worker: out of device memory for a cast buffer of 2.0 GiB"));
    CHECK_FALSE(parse_log_line("2026-11-30T21:40:01.240Z info  host: comfy-supervisor [  12.635] a child's echo"));

    const auto ask = parse_eviction_ask("memory: video (slot 2) needs 18 GiB with 14 GiB free and 64 MiB being freed: "
                                        "asking sdxl (slot 1, generation 4) to detach model 3 \"sdxl-vae\" (160 MiB "
                                        "loaded)");
    REQUIRE(ask);
    CHECK(ask->asker_slot == 2);
    CHECK(ask->owner_slot == 1);
    CHECK(ask->owner_generation == 4);
    CHECK_FALSE(parse_eviction_ask("memory: video (slot 2) is still 512 MiB short with the ledger exhausted: asking 11 "
                                   "idle sibling(s) for a partial release"));
    const auto timeout = parse_answer_timeout(
        "memory: owner deaf (slot 11, generation 3) did not answer within 1000 ms; moving to the next candidate");
    REQUIRE(timeout);
    CHECK(timeout->slot == 11);
    CHECK(timeout->generation == 3);
    const auto release = parse_answer_timeout(
        "memory: sibling idle-2 (slot 12, generation 1) did not answer the partial release within 1000 ms; going on "
        "without it");
    REQUIRE(release);
    CHECK(release->slot == 12);
    CHECK_FALSE(parse_answer_timeout("memory: 2 stand-in unload(s) not answered by their owner within 1000 ms; answered "
                                     "as freeing nothing"));
    CHECK(parse_found_deaf("deaf: deaf: it let a command go unanswered for 1000 ms (memory.answer_timeout_ms); its 128 "
                           "model(s) (128 MiB loaded) are passed over until it answers") == "deaf");
    CHECK_FALSE(parse_found_deaf("deaf: answers the supervisor again: its models are candidates for eviction again"));

    const auto failed = parse_prompt_failure("prompt 8: node denoise failed in its worker");
    REQUIRE(failed);
    CHECK(failed->prompt == 8);
    CHECK(failed->why == "failed in its worker");
    const auto stopped =
        parse_prompt_failure("prompt 46: node load_video_model could not run: the supervisor is shutting down");
    REQUIRE(stopped);
    CHECK(stopped->why == "the supervisor is shutting down");
    CHECK_FALSE(parse_prompt_failure("prompt 2: worker of video died during denoise; retrying on its replacement"));

    CHECK(is_shutdown_start("shutting down (received SIGTERM): asking every worker to finish within 2000 ms"));
    CHECK(is_stale_segment_removed("removing stale segment /comfy-sv-0-soak-1: its creator is gone"));
    CHECK(says_outcome("hostile-write-ledger: worker pid 77 (generation 2) killed by SIGSEGV", "hostile-write-ledger", 77,
                       "killed by SIGSEGV"));
    CHECK_FALSE(says_outcome("hostile-write-ledger: worker pid 771 (generation 2) killed by SIGSEGV",
                             "hostile-write-ledger", 77, "killed by SIGSEGV"));
    CHECK(says_outcome("hostile-ring-garbage: stopping pid 9: its ring to the supervisor is corrupt",
                       "hostile-ring-garbage", 9, "its ring to the supervisor is corrupt"));
    CHECK(parse_child_line("2026-12-01T15:08:45.473Z info  hostile-escape: misbehaving-worker: escaped") ==
          std::optional<std::string>("hostile-escape: misbehaving-worker: escaped"));
    CHECK_FALSE(parse_child_line("2026-12-01T15:08:47.270Z warn  comfy-supervisor [   2.023] escape: ended 2 process(es)"));
    const auto escaped = parse_escaped("hostile-escape: misbehaving-worker: escaped: setsid child 81, daemon 83",
                                       "hostile-escape");
    REQUIRE(escaped);
    CHECK(escaped->setsid_child == 81);
    CHECK(escaped->daemon == 83);
    CHECK_FALSE(parse_escaped("hostile-escape: misbehaving-worker: escaped: setsid child 81, daemon 83", "other"));
    CHECK_FALSE(parse_escaped("hostile-escape: misbehaving-worker: escaped: setsid child 81", "hostile-escape"));
}

TEST_CASE("the soak reads the progress lines and the summary") {
    const std::vector<std::string> output = {
        "prompt 1/200000  node 1/5  sdxl/load_checkpoint",
        "prompt 2/200000  node 1/5  video/load_video_model",
        "prompt 2/200000  node 2/5  video/denoise  (retry)",
        "prompt 3/200000  node 1/5  sdxl/load_checkpoint",
        "",
        "summary",
        "  prompts run        2 of 200000 (1 failed, 199997 not started: shut down first)",
        "  nodes run          12 (1 retried after a worker died)",
        "  processes started  14 (2 restarts)",
        "  peak device use    22 GiB of 24 GiB",
        "  admissions         25 (0 granted short under policy admit, 1 refused)",
        "  answered           23 granted, 1 refused, 1 withdrawn (the asker left first), 0 unanswered",
        "  evictions          19 asked of other participants, 8.5 GiB freed (measured by the owners)",
    };
    CHECK(prompts_started(output) == 3);
    const auto summary = read_summary(output);
    REQUIRE(summary);
    CHECK(summary->prompts_run == 2);
    CHECK(summary->prompts_failed == 1);
    CHECK(summary->nodes_retried == 1);
    CHECK(summary->restarts == 2);
    CHECK(summary->admissions == 25);
    CHECK(summary->granted == 23);
    CHECK(summary->refused == 1);
    CHECK(summary->withdrawn == 1);
    CHECK(summary->unanswered == 0);
    CHECK(summary->evictions == 19);
    CHECK_FALSE(read_summary({output.begin(), output.begin() + 4}));  // killed before its summary
}

TEST_CASE("the ledger check sums an owner's rows against its census, and finds rows of a dead life") {
    ctl::SegmentReport report;
    ctl::WorkerRow video;
    video.slot = 2;
    video.name = "video";
    video.state = "ready";
    video.live = true;
    video.generation = 3;
    report.workers.push_back(video);
    ctl::CensusRow census;
    census.slot = 2;
    census.status = ctl::RecordStatus::ok;
    census.census.device_used_bytes = 16;  // 14 of its model, 2 of cast buffers
    census.census.cast_buffer_bytes = 2;
    report.census.push_back(census);
    ctl::LedgerRow model;
    model.owner_slot = 2;
    model.owner_generation = 3;
    model.loaded_bytes = 14;
    report.ledger.push_back(model);
    CHECK(ledger_disagreements(report).empty());

    SECTION("the census shows more than the ledger") {
        report.census[0].census.device_used_bytes = 17;
        CHECK(ledger_disagreements(report).size() == 1);
    }
    SECTION("a row of the owner's previous life") {
        report.ledger[0].owner_generation = 2;
        const auto found = ledger_disagreements(report);
        REQUIRE(found.size() == 2);  // the stale row, and a census the ledger no longer covers
        CHECK(found[0].find("outlived its owner") != std::string::npos);
    }
    SECTION("a row without its loaded figure yet") {
        report.ledger[0].loaded_bytes.reset();
        CHECK(ledger_disagreements(report).size() == 2);
    }
    SECTION("a participant that is not up has nothing to compare") {
        report.workers[0].state = "draining";
        CHECK(ledger_disagreements(report).empty());
    }
}

TEST_CASE("a seed names the faults: the same plan, every kind in every deck, the supervisor killed in the first half") {
    const auto draw = [](std::uint64_t seed) {
        FaultPlan plan(seed, std::chrono::seconds(600));
        std::vector<std::pair<FaultKind, std::int64_t>> faults;
        for (int second = 0; second < 600; second += 3) {
            faults.emplace_back(plan.next(std::chrono::seconds(second)), plan.pause().count());
        }
        return faults;
    };
    const auto faults = draw(42);
    CHECK(faults == draw(42));
    CHECK(faults != draw(43));
    std::vector<FaultKind> others;
    int supervisor_kills = 0;
    for (std::size_t i = 0; i < faults.size(); ++i) {
        if (faults[i].first == FaultKind::kill_supervisor) {
            ++supervisor_kills;
            CHECK(i * 3 <= 303);
        } else {
            others.push_back(faults[i].first);
        }
    }
    CHECK(supervisor_kills == 3);  // one per five minutes started
    // A deck is nine: every kind but the supervisor's kill, the hostile packs and calls twice.
    CHECK(std::set<FaultKind>(others.begin(), others.begin() + 9).size() == 7);
    CHECK(std::set<FaultKind>(others.begin() + 9, others.begin() + 18).size() == 7);
}
