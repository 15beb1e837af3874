// The supervisor's census reader: it copies only the censuses that changed, and must still
// notice every change, believe only what the live generation wrote whole and plausible,
// let a corrupt census cost its own slot alone, and give the simulated device's figures
// as the supervisor's account of it has them.
#include <catch2/catch.hpp>

#include "ipc/sealed_region.hpp"
#include "shared/participant_region.hpp"
#include "supervisor/memory/census_reader.hpp"
#include "tests/support/test_instance.hpp"

#include <atomic>
#include <optional>
#include <random>
#include <type_traits>

using namespace comfy;
using comfy::supervisor::CensusReader;

namespace {

constexpr Bytes kDevice = 24 * kGiB;
constexpr Capacities kCaps{8, 16, 8};

CensusRecord census(std::uint32_t generation, Bytes reserved) {
    CensusRecord record{};
    record.generation = generation;
    record.allocator_reserved = reserved;
    record.allocator_active = reserved / 2;
    return record;
}

// The machine as the supervisor sees it: its segment, its account of the simulated
// device, and one region per slot written as the participants would (this test is every
// participant).
struct Machine {
    Machine()
        : segment(create_segment(test::test_instance("census"), kCaps, kDevice)),
          view(view_of(segment)),
          writes(view, SegmentView(segment.published()->base(), kCaps)),
          device(kDevice, kCaps.participants, writes),
          reader(view, &device, nullptr) {
        for (std::uint32_t slot = 0; slot < kCaps.participants; ++slot) start(slot, 1);
    }

    // A new life in `slot`: a fresh region, its participant record, and the reader told.
    void start(std::uint32_t slot, std::uint32_t generation) {
        const auto bytes = ParticipantRegionMap::compute(kCaps.ring_slots).total_bytes;
        if (regions.size() <= slot) regions.resize(slot + 1);
        reader.forget(slot);  // before the old region goes
        regions[slot].memory = ipc::SealedRegion::create("test-slot", bytes, ipc::Access::read_write);
        regions[slot].view = ParticipantRegionView(regions[slot].memory.base(), kCaps.ring_slots);
        regions[slot].census.emplace(regions[slot].view.census().census);
        device.forget(slot);
        reader.watch(slot, regions[slot].view.census(), generation);
        generations.resize(kCaps.participants);
        generations[slot] = generation;
    }
    // The participant in `slot` writes its census, then sends a message (which the
    // supervisor hears before it handles the message).
    void write_census(std::uint32_t slot, const CensusRecord& record) {
        write_census_silently(slot, record);
        reader.heard_from(slot);
    }
    // The same with no message after it: only a full refresh (the heartbeat check) sees it.
    void write_census_silently(std::uint32_t slot, const CensusRecord& record) { regions[slot].census->write(record); }
    // The participant in `slot` now holds `bytes` of the device, when they fit.
    bool use_device(std::uint32_t slot, Bytes bytes) {
        device.forget(slot);
        return device.allocate(slot, bytes);
    }

    struct Region {
        ipc::SealedRegion memory;
        ParticipantRegionView view;
        std::optional<ipc::SeqlockWriter<CensusRecord>> census;
    };
    ipc::SharedSegment segment;
    SegmentView view;
    supervisor::SegmentWriter writes;
    supervisor::SimulatedDeviceUse device;
    CensusReader reader;
    std::vector<Region> regions;
    std::vector<std::uint32_t> generations;
};

// Leaves a seqlock looking mid-write, as a writer that died inside write() or a stray
// write would: its sequence word comes first.
template <class T>
void tear(ipc::Seqlock<T>& lock) {
    static_assert(std::is_standard_layout_v<ipc::Seqlock<T>>);
    // Relaxed: this thread is the only one touching the record, and reads it next itself.
    reinterpret_cast<std::atomic<std::uint32_t>*>(&lock)->fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

TEST_CASE("the census reader notices a changed slot, and a corrupt or torn one costs only its own") {
    Machine m;
    m.write_census(1, census(1, 2 * kGiB));
    m.write_census(2, census(1, 1 * kGiB));
    m.write_census(3, census(0, 5 * kGiB));  // another life's generation: not believed
    REQUIRE(m.use_device(1, 3 * kGiB));
    REQUIRE(m.use_device(2, 1 * kGiB));

    auto snap = m.reader.snapshot(7);
    CHECK(snap.now_ms == 7);
    CHECK(snap.device_total == kDevice);
    CHECK(snap.device_free == kDevice - 4 * kGiB);
    REQUIRE(snap.participants.size() == 2);
    CHECK(snap.participants.at(1).allocator_reserved == 2 * kGiB);
    CHECK(snap.participants.at(2).allocator_active == kGiB / 2);
    CHECK(m.reader.report(3).status == static_cast<std::uint8_t>(CensusStatus::stale));
    CHECK(m.reader.report(5).status == static_cast<std::uint8_t>(CensusStatus::unread));

    // A changed census is seen at the next snapshot.
    m.write_census(2, census(1, 4 * kGiB));
    snap = m.reader.snapshot(8);
    CHECK(snap.participants.at(2).allocator_reserved == 4 * kGiB);

    // Slot 3's worker writes its census: believed from then on.
    m.write_census(3, census(1, kGiB));
    CHECK(m.reader.snapshot(9).participants.count(3) == 1);

    // A figure no machine has: that slot is no longer believed, the others still are.
    m.write_census(1, census(1, kMaxBytes + 1));
    snap = m.reader.snapshot(10);
    CHECK(snap.participants.count(1) == 0);
    CHECK(snap.participants.count(2) == 1);
    CHECK(m.reader.believable().count(1) == 0);
    CHECK(m.reader.report(1).status == static_cast<std::uint8_t>(CensusStatus::unreadable));

    // A census left mid-write: that slot is not believed and is reported unreadable; the
    // device figure and every other slot are untouched.
    tear(m.regions[2].view.census().census);
    m.reader.refresh();  // the heartbeat check, which reads every slot
    snap = m.reader.snapshot(11);
    CHECK(snap.device_free == kDevice - 4 * kGiB);
    CHECK(snap.participants.count(2) == 0);
    CHECK(snap.participants.count(3) == 1);
    CHECK(m.reader.report(2).status == static_cast<std::uint8_t>(CensusStatus::unreadable));

    // The slot's worker exits: its census is no longer believed and its device use is gone.
    m.reader.forget(2);
    m.device.forget(2);
    snap = m.reader.snapshot(12);
    CHECK(snap.participants.count(2) == 0);
    CHECK(snap.device_free == kDevice - 3 * kGiB);
}

TEST_CASE("an event reads only the census of the participant heard from, and the heartbeat check reads every one") {
    Machine m;
    m.write_census(1, census(1, 2 * kGiB));
    m.write_census(2, census(1, 1 * kGiB));
    CHECK(m.reader.snapshot(1).participants.at(2).allocator_reserved == 1 * kGiB);
    (void)m.reader.take_changed();

    // Slot 2 writes without a message after it: the events that follow (slot 1's) do not
    // read slot 2, so they cost the same however many participants sit idle.
    m.write_census_silently(2, census(1, 3 * kGiB));
    m.write_census(1, census(1, 4 * kGiB));
    auto snap = m.reader.snapshot(2);
    CHECK(snap.participants.at(1).allocator_reserved == 4 * kGiB);
    CHECK(snap.participants.at(2).allocator_reserved == 1 * kGiB);
    CHECK(m.reader.take_changed() == std::vector<std::uint32_t>{1});

    // The heartbeat check's full refresh finds it; so does slot 2's next message.
    m.reader.refresh();
    CHECK(m.reader.snapshot(3).participants.at(2).allocator_reserved == 3 * kGiB);
    CHECK(m.reader.take_changed() == std::vector<std::uint32_t>{2});
    m.write_census_silently(2, census(1, 5 * kGiB));
    m.reader.heard_from(2);
    CHECK(m.reader.snapshot(4).participants.at(2).allocator_reserved == 5 * kGiB);
}

TEST_CASE("the census reader's device figure and believed censuses match a full read after every change") {
    Machine m;
    std::vector<Bytes> held(kCaps.participants, 0);  // what each slot holds, as this test counts it
    std::mt19937_64 random(GENERATE(1u, 2u, 3u));
    const auto uniform = [&](std::uint64_t lo, std::uint64_t hi) {
        return std::uniform_int_distribution<std::uint64_t>(lo, hi)(random);
    };
    for (int step = 0; step < 2000; ++step) {
        const auto slot = static_cast<std::uint32_t>(uniform(0, kCaps.participants - 1));
        switch (uniform(0, 5)) {
            case 0:  // a new life in the slot
                m.start(slot, m.generations[slot] + 1);
                held[slot] = 0;
                break;
            case 1: {  // its device use changes: granted only when it fits beside the others'
                const Bytes bytes = uniform(0, 6) * kGiB;
                Bytes others = 0;
                for (std::uint32_t s = 0; s < kCaps.participants; ++s) others += s == slot ? 0 : held[s];
                REQUIRE(m.use_device(slot, bytes) == (others + bytes <= kDevice));
                held[slot] = others + bytes <= kDevice ? bytes : 0;
                break;
            }
            default: {
                const Bytes reserved = uniform(0, 9) == 0 ? kMaxBytes + uniform(1, 9) : uniform(0, 8) * kGiB;
                m.write_census(slot, census(m.generations[slot] - static_cast<std::uint32_t>(uniform(0, 1)), reserved));
                break;
            }
        }
        const auto& snap = m.reader.snapshot(static_cast<std::uint64_t>(step));
        Bytes used = 0;
        for (const Bytes bytes : held) used += bytes;
        REQUIRE(snap.device_free == kDevice - used);
        // Relaxed: this thread wrote it.
        REQUIRE(m.view.device().used_bytes.load(std::memory_order_relaxed) == used);
        for (std::uint32_t s = 0; s < kCaps.participants; ++s) {
            CensusRecord read{};
            std::uint32_t sequence = 0;
            REQUIRE(m.regions[s].view.census().census.read(read, sequence) == ipc::SeqlockRead::ok);
            const bool believable =
                sequence != 0 && read.generation == m.generations[s] && read.allocator_reserved <= kMaxBytes;
            REQUIRE(snap.participants.count(s) == (believable ? 1u : 0u));
            if (believable) CHECK(snap.participants.at(s).allocator_reserved == read.allocator_reserved);
        }
    }
}
