// The supervisor's census reader: it copies only the slots whose records changed, and
// must still notice every change, believe only what the live generation wrote whole and
// plausible, and give the same device figure as device_accounting's rule.
#include <catch2/catch.hpp>

#include "shared/device_accounting.hpp"
#include "supervisor/census_reader.hpp"
#include "tests/support/test_instance.hpp"

#include <atomic>
#include <random>
#include <type_traits>

using namespace comfy;
using comfy::supervisor::CensusReader;

namespace {

constexpr Bytes kDevice = 24 * kGiB;
constexpr Capacities kCaps{8, 16, 8};

ParticipantRecord live(std::uint32_t generation) {
    ParticipantRecord record{};
    record.generation = generation;
    record.state = static_cast<std::uint8_t>(ParticipantState::ready);
    return record;
}

CensusRecord census(std::uint32_t generation, Bytes reserved, Bytes device_used) {
    CensusRecord record{};
    record.generation = generation;
    record.allocator_reserved = reserved;
    record.allocator_active = reserved / 2;
    record.device_used_bytes = device_used;
    return record;
}

// Leaves a seqlock looking mid-write, as a writer that died inside write(): its sequence
// word comes first.
template <class T>
void tear(ipc::Seqlock<T>& lock) {
    static_assert(std::is_standard_layout_v<ipc::Seqlock<T>>);
    // Relaxed: this thread is the only one touching the record, and reads it next itself.
    reinterpret_cast<std::atomic<std::uint32_t>*>(&lock)->fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

TEST_CASE("the census reader notices a changed slot, and a corrupt or torn one costs only its own") {
    auto segment = create_segment(test::test_instance("census"), kCaps, kDevice);
    const auto view = view_of(segment);
    CensusReader reader(view, nullptr);
    for (std::uint32_t slot = 1; slot <= 3; ++slot) {
        view.participant(slot).record.write(live(1));
        reader.expect(slot, 1);
    }
    view.census(1).census.write(census(1, 2 * kGiB, 3 * kGiB));
    view.census(2).census.write(census(1, 1 * kGiB, 1 * kGiB));
    view.census(3).census.write(census(0, 5 * kGiB, 0));  // an earlier life's: not believed

    auto snap = reader.snapshot(7);
    CHECK(snap.now_ms == 7);
    CHECK(snap.device_total == kDevice);
    CHECK(snap.device_free == kDevice - 4 * kGiB);
    REQUIRE(snap.participants.size() == 2);
    CHECK(snap.participants.at(1).allocator_reserved == 2 * kGiB);
    CHECK(snap.participants.at(2).allocator_active == kGiB / 2);

    // A changed slot is seen at the next snapshot.
    view.census(2).census.write(census(1, 4 * kGiB, 2 * kGiB));
    snap = reader.snapshot(8);
    CHECK(snap.participants.at(2).allocator_reserved == 4 * kGiB);
    CHECK(snap.device_free == kDevice - 5 * kGiB);

    // Slot 3's worker writes its census: believed from then on.
    view.census(3).census.write(census(1, kGiB, 0));
    CHECK(reader.snapshot(9).participants.count(3) == 1);

    // A figure no machine has: that slot is no longer believed, the others still are.
    view.census(1).census.write(census(1, kMaxBytes + 1, 3 * kGiB));
    snap = reader.snapshot(10);
    CHECK(snap.participants.count(1) == 0);
    CHECK(snap.participants.count(2) == 1);
    CHECK(reader.believable().count(1) == 0);

    // A census left mid-write: the device counts as full; the slot is not believed.
    tear(view.census(2).census);
    snap = reader.snapshot(11);
    CHECK(snap.device_free == 0);
    CHECK(snap.participants.count(2) == 0);
    CHECK(snap.participants.count(3) == 1);
    view.census(2).census.reset();  // the supervisor's recovery when the writer died
    snap = reader.snapshot(12);
    CHECK(snap.device_free == kDevice - 3 * kGiB);  // slot 1's device use still counts: the rule is device_accounting's

    // The slot's worker exits: its census is no longer believed, even unchanged.
    reader.expect(3, std::nullopt);
    CHECK(reader.snapshot(13).participants.count(3) == 0);
}

TEST_CASE("the census reader's device figure and believed censuses match a full read after every change") {
    auto segment = create_segment(test::test_instance("census"), kCaps, kDevice);
    const auto view = view_of(segment);
    CensusReader reader(view, nullptr);
    std::mt19937_64 random(GENERATE(1u, 2u, 3u));
    const auto uniform = [&](std::uint64_t lo, std::uint64_t hi) {
        return std::uniform_int_distribution<std::uint64_t>(lo, hi)(random);
    };
    std::vector<std::uint32_t> expected(kCaps.participants, 1);
    for (std::uint32_t slot = 0; slot < kCaps.participants; ++slot) reader.expect(slot, 1);
    for (int step = 0; step < 2000; ++step) {
        const auto slot = static_cast<std::uint32_t>(uniform(0, kCaps.participants - 1));
        switch (uniform(0, 5)) {
            case 0: {  // the supervisor publishes the slot's participant record
                ParticipantRecord record = live(static_cast<std::uint32_t>(uniform(1, 2)));
                record.state = static_cast<std::uint8_t>(uniform(0, 5));
                view.participant(slot).record.write(record);
                break;
            }
            case 1:  // a new life (or none) in the slot
                expected[slot] = static_cast<std::uint32_t>(uniform(1, 2));
                reader.expect(slot, expected[slot]);
                break;
            case 2: view.census(slot).census.reset(); break;
            default: {
                const Bytes reserved = uniform(0, 9) == 0 ? kMaxBytes + uniform(1, 9) : uniform(0, 8) * kGiB;
                view.census(slot).census.write(
                    census(static_cast<std::uint32_t>(uniform(0, 2)), reserved, uniform(0, 4) * kGiB));
                break;
            }
        }
        const auto& snap = reader.snapshot(static_cast<std::uint64_t>(step));
        REQUIRE(snap.device_free == simulated_device_free(view));
        for (std::uint32_t s = 0; s < kCaps.participants; ++s) {
            CensusRecord read{};
            REQUIRE(view.census(s).census.read(read) == ipc::SeqlockRead::ok);
            const bool believable = read.generation == expected[s] && read.allocator_reserved <= kMaxBytes;
            REQUIRE(snap.participants.count(s) == (believable ? 1u : 0u));
            if (believable) CHECK(snap.participants.at(s).allocator_reserved == read.allocator_reserved);
        }
    }
}
