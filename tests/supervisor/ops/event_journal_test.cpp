// The event journal: numbered events, the oldest dropped past the capacity, readers that
// resume from the last number they saw, listeners told once.
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

TEST_CASE("an event as JSON carries its number, UTC time, kind, pack, line and figures") {
    EventJournal journal;
    journal.record("admission", "video", "granted 14 GiB", {{"bytes", 15032385536ULL}});
    const auto json = to_json(journal.since(0).front());
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
