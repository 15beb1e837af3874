// The event journal: numbered events, the oldest dropped past the capacity, readers that
// resume from the last number they saw, listeners told once, failures kept apart.
#include <catch2/catch.hpp>

#include "supervisor/ops/log/event_journal.hpp"

using namespace comfy::supervisor;

namespace {
std::vector<std::uint64_t> numbers(const std::vector<JournalEvent>& events) {
    std::vector<std::uint64_t> out;
    for (const auto& event : events) out.push_back(event.seq);
    return out;
}
}  // namespace

TEST_CASE("a reader resumes after the last number it saw and sees a gap once it fell behind the capacity") {
    EventJournal journal(3);
    CHECK(journal.since(0).empty());
    CHECK(journal.last_seq() == 0);
    for (int i = 0; i < 5; ++i) journal.record("spawned", "sdxl", "line " + std::to_string(i));
    CHECK(journal.last_seq() == 5);
    CHECK(numbers(journal.since(0)) == std::vector<std::uint64_t>{3, 4, 5});
    CHECK(numbers(journal.since(3)) == std::vector<std::uint64_t>{4, 5});
    CHECK(journal.since(5).empty());
    CHECK(journal.since(99).empty());
    CHECK(numbers(journal.since(0, 2)) == std::vector<std::uint64_t>{4, 5});
    CHECK(journal.since(4).front().text == "line 4");
}

TEST_CASE("failures outlast any number of routine events, and a reader resumes among them by number") {
    EventJournal journal(10, 3);
    journal.record("exited", "video", "worker pid 12 (generation 1) killed by SIGKILL", {}, LogLevel::warning);
    journal.record("restarting", "video", "restarting in 100 ms", {}, LogLevel::warning);
    // A demo's prompts: a hundred routine memory events a minute.
    for (int i = 0; i < 500; ++i) journal.record("admission", "sdxl", "granted 6 GiB");
    CHECK(journal.since(0).size() == 10);
    CHECK(journal.since(0).front().kind == "admission");
    CHECK(numbers(journal.since(0, SIZE_MAX, EventFilter::failures)) == std::vector<std::uint64_t>{1, 2});
    CHECK(numbers(journal.since(1, SIZE_MAX, EventFilter::failures)) == std::vector<std::uint64_t>{2});
    CHECK(journal.since(2, SIZE_MAX, EventFilter::failures).empty());
    // Failures have a capacity of their own: the oldest go past it.
    for (int i = 0; i < 3; ++i) journal.record("failed", "broken", "failed: cannot import", {}, LogLevel::error);
    CHECK(numbers(journal.since(0, SIZE_MAX, EventFilter::failures)) == std::vector<std::uint64_t>{503, 504, 505});
    CHECK(numbers(journal.since(0, 1, EventFilter::failures)) == std::vector<std::uint64_t>{505});
    CHECK(journal.since(503, SIZE_MAX, EventFilter::failures).front().text == "failed: cannot import");
}

TEST_CASE("an event as JSON carries its number, UTC time, level, kind, pack, line and figures") {
    EventJournal journal;
    journal.record("admission", "video", "granted 14 GiB", {{"bytes", 15032385536ULL}});
    journal.record("admission", "video", "refused 14 GiB", {}, LogLevel::warning);
    CHECK(to_json(journal.since(1).front())["level"] == "warning");
    const auto json = to_json(journal.since(0).front());
    CHECK(json["level"] == "info");
    CHECK(json["seq"] == 1);
    CHECK(json["kind"] == "admission");
    CHECK(json["pack"] == "video");
    CHECK(json["figures"]["bytes"] == 15032385536ULL);
    const auto time = json["time"].get<std::string>();
    REQUIRE(time.size() == 24);  // 2026-11-30T21:00:00.000Z
    CHECK(time[10] == 'T');
    CHECK(time.back() == 'Z');
}

TEST_CASE("a listener hears each event once until it stops listening, even from inside its own call") {
    EventJournal journal;
    std::vector<std::uint64_t> heard;
    std::uint64_t id = 0;
    id = journal.listen([&](const JournalEvent& event) {
        heard.push_back(event.seq);
        if (event.seq == 2) journal.unlisten(id);
    });
    for (int i = 0; i < 3; ++i) journal.record("exited", "upscale", "gone");
    CHECK(heard == std::vector<std::uint64_t>{1, 2});
}
