// A participant's copy of the ledger is read again only when the supervisor changed the
// ledger: while the generation stays, an idle participant reads no row; when it moves, the
// rows are read, validated and sorted again, a row caught mid-write left out until the next.
#include <catch2/catch.hpp>

#include "supervisor/memory/segment_writer.hpp"
#include "tests/support/test_instance.hpp"
#include "worker/ledger_mirror.hpp"

#include <atomic>

using namespace comfy;

namespace {

constexpr Capacities kCaps{8, 32, 8};

LedgerRecord row(std::uint32_t owner, std::uint64_t model_id, std::uint64_t load_order) {
    LedgerRecord record{};
    record.owner_slot = owner;
    record.owner_generation = 1;
    record.model_id = model_id;
    record.total_bytes = kGiB;
    record.loaded_bytes = kGiB;
    record.load_order = load_order;
    return record;
}

// The supervisor's side: its segment and its one writer.
struct Supervisor {
    Supervisor()
        : segment(create_segment(test::test_instance("mirror"), kCaps)),
          view(view_of(segment)),
          writes(view, SegmentView(segment.published()->base(), kCaps)) {}
    ipc::SharedSegment segment;
    SegmentView view;
    supervisor::SegmentWriter writes;
};

}  // namespace

TEST_CASE("an idle participant reads no ledger row while the generation does not move") {
    Supervisor s;
    worker::LedgerMirror mirror(s.view);
    CHECK(mirror.rows().empty());
    const std::uint64_t empty_at = mirror.generation();
    for (int look = 0; look < 100; ++look) CHECK(mirror.rows().empty());
    CHECK(mirror.reads() == 1);
    CHECK(mirror.generation() == empty_at);

    // A batch of rows, then the generation: read once more, most recent first.
    s.writes.ledger(3, row(1, 10, 5));
    s.writes.ledger(7, row(2, 20, 9));
    s.writes.ledger(1, row(1, 11, 7));
    s.writes.ledger_changed();
    CHECK(mirror.generation() == empty_at + 1);
    const auto& rows = mirror.rows();
    REQUIRE(rows.size() == 3);
    CHECK(rows[0].model_id == 20);
    CHECK(rows[1].model_id == 11);
    CHECK(rows[2].model_id == 10);
    for (int look = 0; look < 100; ++look) CHECK(mirror.rows().size() == 3);
    CHECK(mirror.reads() == 2);

    // A row freed and one no supervisor could have written (an owner past the table): the
    // first goes, the second is left out.
    s.writes.ledger(3, LedgerRecord{});
    s.writes.ledger(5, row(kCaps.participants, 30, 11));
    s.writes.ledger_changed();
    REQUIRE(mirror.rows().size() == 2);
    CHECK(mirror.rows()[0].model_id == 20);
    CHECK(mirror.reads() == 3);
}

TEST_CASE("a ledger row caught mid-write is left out, and read once the generation moves") {
    Supervisor s;
    worker::LedgerMirror mirror(s.view);
    s.writes.ledger(2, row(1, 10, 1));
    s.writes.ledger_changed();
    REQUIRE(mirror.rows().size() == 1);

    // The supervisor is inside its next write of row 4 (its sequence odd) and has not yet
    // moved the generation: the reader sees the old ledger.
    auto& sequence = *reinterpret_cast<std::atomic<std::uint32_t>*>(&s.view.ledger(4).entry);
    // Relaxed: this thread is the only one here; it stands for the writer's first step.
    sequence.fetch_add(1, std::memory_order_relaxed);
    CHECK(mirror.rows().size() == 1);

    // The write ends (the row as it was: the next write goes through the writer) and the
    // generation moves: the row is read.
    sequence.fetch_sub(1, std::memory_order_relaxed);
    s.writes.ledger(4, row(3, 40, 2));
    s.writes.ledger_changed();
    REQUIRE(mirror.rows().size() == 2);
    CHECK(mirror.rows()[0].model_id == 40);
}

TEST_CASE("a row carries its owner's pack name while the owner's record is of the row's generation and valid") {
    Supervisor s;
    worker::LedgerMirror mirror(s.view);
    ParticipantRecord sdxl{};
    set_name(sdxl.name, "sdxl");
    sdxl.generation = 1;
    s.writes.participant(1, sdxl);
    ParticipantRecord restarted = sdxl;  // started again since its rows were written
    set_name(restarted.name, "upscale");
    restarted.generation = 2;
    s.writes.participant(2, restarted);
    ParticipantRecord garbled = sdxl;  // bytes no supervisor writes after the name's NUL
    set_name(garbled.name, "flux");
    garbled.name[6] = 'x';
    s.writes.participant(3, garbled);
    s.writes.ledger(0, row(1, 10, 1));
    s.writes.ledger(1, row(2, 20, 2));
    s.writes.ledger(2, row(3, 30, 3));
    s.writes.ledger_changed();
    const auto& rows = mirror.rows();
    REQUIRE(rows.size() == 3);
    CHECK(mirror.owner_name(rows[2]) == "sdxl");
    CHECK(mirror.owner_name(rows[1]).empty());
    CHECK(mirror.owner_name(rows[0]).empty());
}
