// The seqlock: a hammering writer never lets a reader see a torn value, within one
// process and across two; a writer that died mid-write leaves readers "busy", not lied to.
#include <catch2/catch.hpp>

#include "ipc/seqlock.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/shared_block.hpp"

#include <atomic>
#include <thread>
#include <vector>

using comfy::ipc::Seqlock;
using comfy::ipc::SeqlockRead;
using comfy::ipc::SeqlockWriter;

namespace {

// Every field derives from `base`, so a mix of two writes breaks the invariant.
struct Record {
    std::uint64_t base;
    std::uint64_t doubled;
    std::uint64_t inverted;
    std::uint32_t low;
    std::uint32_t high;
    std::uint64_t tail[8];
};

Record make(std::uint64_t base) {
    Record r{base, base * 2, ~base, static_cast<std::uint32_t>(base), static_cast<std::uint32_t>(base >> 32), {}};
    for (auto& t : r.tail) t = base + 1;
    return r;
}

bool consistent(const Record& r) {
    if (r.doubled != r.base * 2 || r.inverted != ~r.base) return false;
    if (r.low != static_cast<std::uint32_t>(r.base) || r.high != static_cast<std::uint32_t>(r.base >> 32)) return false;
    for (const auto t : r.tail) {
        if (t != r.base + 1) return false;
    }
    return true;
}

}  // namespace

TEST_CASE("readers never see a torn record while a writer hammers it") {
    Seqlock<Record> lock;
    SeqlockWriter<Record> writer(lock);
    writer.write(make(0));
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> torn{0};
    std::atomic<std::uint64_t> good{0};

    std::vector<std::thread> readers;
    for (int i = 0; i < 2; ++i) {
        readers.emplace_back([&] {
            Record r{};
            // Relaxed: a flag to end the loop; no data is published through it.
            while (!stop.load(std::memory_order_relaxed)) {
                if (lock.read(r) != SeqlockRead::ok) continue;
                // Relaxed: counters read only after join().
                (consistent(r) ? good : torn).fetch_add(1, std::memory_order_relaxed);
            }
        });
    }
    for (std::uint64_t n = 1; n <= 3'000'000; ++n) writer.write(make(n * 0x9E3779B97F4A7C15ull));
    stop.store(true, std::memory_order_relaxed);  // Relaxed: see above.
    for (auto& t : readers) t.join();
    CHECK(torn.load() == 0);
    CHECK(good.load() > 0);
}

TEST_CASE("a reader in another process never sees a torn record") {
    comfy::test::SharedBlock block(sizeof(Seqlock<Record>));
    auto* lock = new (block.get()) Seqlock<Record>();

    comfy::test::ChildProcess writer([&] {
        SeqlockWriter<Record> own(*lock);
        for (std::uint64_t n = 0; n <= 3'000'000; ++n) own.write(make(n * 0x9E3779B97F4A7C15ull));
        return 0;
    });
    std::uint64_t torn = 0;
    std::uint64_t good = 0;
    Record r{};
    while (lock->sequence() == 0) {
        // The record is fresh until the child's first write; only written values count.
    }
    for (int i = 0; i < 2'000'000; ++i) {
        if (lock->read(r) != SeqlockRead::ok) continue;
        (consistent(r) ? good : torn) += 1;
    }
    CHECK(writer.wait() == 0);
    CHECK(torn == 0);
    CHECK(good > 0);
    REQUIRE(lock->read(r) == SeqlockRead::ok);
    CHECK(r.base == 3'000'000 * 0x9E3779B97F4A7C15ull);
}

TEST_CASE("a record left mid-write reads busy, and its writer's next write heals it") {
    static_assert(std::is_standard_layout_v<Seqlock<Record>>, "the sequence word is the first member");
    Seqlock<Record> lock;
    SeqlockWriter<Record> writer(lock);
    writer.write(make(5));
    // A writer killed between its two sequence stores, or a stray write: the word is odd.
    auto& sequence = *reinterpret_cast<std::atomic<std::uint32_t>*>(&lock);
    sequence.store(1001);

    Record r{};
    CHECK(lock.read(r, 100) == SeqlockRead::busy);
    // The writer keeps its sequence privately, so the odd word does not steer it: the
    // next write makes the record whole again, with the writer's own next sequence.
    writer.write(make(9));
    std::uint32_t read_at = 0;
    REQUIRE(lock.read(r, read_at) == SeqlockRead::ok);
    CHECK(r.base == 9);
    CHECK(read_at == 4);
}
