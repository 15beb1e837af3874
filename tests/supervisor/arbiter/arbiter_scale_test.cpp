// What keeps the arbiter's work proportional to the work at hand (issue 8, part 5): a
// dead owner's entries are found through the index and their rows still reused lowest
// first, and the order stays right with the tombstones they leave; loaded_on is a running sum; the siblings holding kept models are found from the
// keep list. Each is checked against a plain reference, not timed (scripts/bench times them).
#include <catch2/catch.hpp>

#include "supervisor/arbiter/arbiter.hpp"
#include "supervisor/arbiter/eviction_order.hpp"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <tuple>

using namespace comfy;
using namespace comfy::arbiter;

namespace {

// The ledger as a plain table: what each row holds, by (slot, model).
struct ReferenceLedger {
    struct Row {
        std::uint32_t slot;
        std::uint64_t model;
        std::uint32_t device;
        Bytes loaded_or_total;
    };
    std::vector<std::optional<Row>> rows;

    explicit ReferenceLedger(std::size_t capacity) : rows(capacity) {}

    std::optional<std::size_t> find(std::uint32_t slot, std::uint64_t model) const {
        for (std::size_t i = 0; i < rows.size(); ++i) {
            if (rows[i] && rows[i]->slot == slot && rows[i]->model == model) return i;
        }
        return std::nullopt;
    }
    // The lowest unused row, as the segment's table expects.
    std::optional<std::size_t> lowest_free() const {
        for (std::size_t i = 0; i < rows.size(); ++i) {
            if (!rows[i]) return i;
        }
        return std::nullopt;
    }
    Bytes loaded_on(std::uint32_t device, std::optional<std::uint32_t> except) const {
        Bytes sum = 0;
        for (const auto& row : rows) {
            if (row && row->device == device && row->slot != except) sum += row->loaded_or_total;
        }
        return sum;
    }
};

void check_equal(const Ledger& ledger, const ReferenceLedger& reference) {
    std::size_t used = 0;
    for (std::size_t i = 0; i < reference.rows.size(); ++i) {
        const auto& want = reference.rows[i];
        const auto& got = ledger.at(i);
        REQUIRE(want.has_value() == got.has_value());
        if (!want) continue;
        ++used;
        CHECK(got->owner_slot == want->slot);
        CHECK(got->model_id == want->model);
        CHECK(got->device == want->device);
        CHECK(got->loaded_or_total() == want->loaded_or_total);
    }
    CHECK(ledger.size() == used);
    for (std::uint32_t device = 0; device < 3; ++device) {
        // The order holds every live entry of the device once, sorted by its key, whatever
        // tombstones owners' deaths left behind.
        std::vector<std::pair<Ledger::OrderKey, std::size_t>> sorted;
        for (std::size_t i = 0; i < reference.rows.size(); ++i) {
            if (ledger.at(i) && ledger.at(i)->device == device) sorted.emplace_back(Ledger::order_key(*ledger.at(i)), i);
        }
        std::sort(sorted.begin(), sorted.end());
        std::vector<std::size_t> expected;
        for (const auto& [key, row] : sorted) expected.push_back(row);
        CHECK(eviction_order(ledger, EvictionQuery{device, {}}) == expected);
        CHECK(ledger.loaded_on(device) == reference.loaded_on(device, std::nullopt));
        for (std::uint32_t slot = 1; slot <= 6; ++slot) {
            CHECK(ledger.loaded_on(device, slot) == reference.loaded_on(device, slot));
        }
    }
}

}  // namespace

TEST_CASE("registrations, drops, unloads and owner deaths keep the ledger equal to a plain table, rows reused lowest first") {
    constexpr std::size_t kCapacity = 48;
    std::mt19937_64 random(GENERATE(1u, 2u, 3u, 4u, 5u));
    const auto uniform = [&](std::uint64_t lo, std::uint64_t hi) {
        return std::uniform_int_distribution<std::uint64_t>(lo, hi)(random);
    };
    Ledger ledger(kCapacity);
    ReferenceLedger reference(kCapacity);
    std::uint64_t sequence = 0;  // one counter for every report: always newer than the last
    for (int step = 0; step < 3000; ++step) {
        const auto slot = static_cast<std::uint32_t>(uniform(1, 6));
        const std::uint64_t model = uniform(1, 12);
        switch (uniform(0, 9)) {
            case 0: {  // the owner dies: every entry of its slot goes
                ledger.erase_owner(slot);
                for (auto& row : reference.rows) {
                    if (row && row->slot == slot) row.reset();
                }
                break;
            }
            case 1:
            case 2: {
                CHECK(ledger.apply_dropped(slot, 1, model) == reference.find(slot, model).has_value());
                if (const auto row = reference.find(slot, model)) reference.rows[*row].reset();
                break;
            }
            case 3: {
                const auto row = reference.find(slot, model);
                if (!row) break;
                const Bytes freed = uniform(0, 2 * kMiB);
                Bytes& loaded = reference.rows[*row]->loaded_or_total;
                loaded -= std::min(freed, loaded);
                CHECK(ledger.apply_unloaded(slot, 1, UnloadReceipt{model, freed, freed, ++sequence, loaded, 0, {}}));
                break;
            }
            default: {
                const auto device = static_cast<std::uint32_t>(uniform(0, 2));
                const Bytes total = uniform(1, 4) * kMiB;
                const Bytes loaded = uniform(0, 3) == 0 ? kUnknownBytes : uniform(0, total);
                const auto known = reference.find(slot, model);
                const auto expected_row = known ? known : reference.lowest_free();
                const auto row = ledger.apply_registered(slot, 1, ModelRegistered{model, model, total, loaded, device, 0, 0, 0});
                REQUIRE(row == expected_row);  // nothing when full; otherwise the lowest free row
                if (row) reference.rows[*row] = ReferenceLedger::Row{slot, model, device, loaded == kUnknownBytes ? total : loaded};
                break;
            }
        }
        check_equal(ledger, reference);
    }
}

TEST_CASE("an owner's death frees exactly its rows, and they are reused from the lowest") {
    Ledger ledger(8);
    // Slots 1 and 2 interleaved: rows 0, 2, 4, 6 are slot 1's.
    for (std::uint64_t id = 1; id <= 4; ++id) {
        REQUIRE(ledger.apply_registered(1, 1, ModelRegistered{id, id, kMiB, kMiB, 0, 0, 0, 0}));
        REQUIRE(ledger.apply_registered(2, 1, ModelRegistered{id, id, kMiB, kMiB, 0, 0, 0, 0}));
    }
    REQUIRE(ledger.size() == 8);
    CHECK_FALSE(ledger.apply_registered(3, 1, ModelRegistered{1, 1, kMiB, kMiB, 0, 0, 0, 0}));  // full
    ledger.take_changed();
    ledger.erase_owner(1);
    CHECK(ledger.size() == 4);
    CHECK(ledger.take_changed() == std::vector<std::size_t>{0, 2, 4, 6});
    CHECK(ledger.take_changed().empty());
    CHECK(ledger.loaded_on(0) == 4 * kMiB);
    for (const std::size_t expected : {0u, 2u, 4u, 6u}) {
        CHECK(ledger.apply_registered(3, 1, ModelRegistered{expected + 1, 1, kMiB, kMiB, 0, 0, 0, 0}) == expected);
    }
    CHECK_FALSE(ledger.apply_registered(3, 1, ModelRegistered{99, 1, kMiB, kMiB, 0, 0, 0, 0}));
}

TEST_CASE("siblings holding a kept model are not asked for a partial release, and the others are") {
    ArbiterConfig config;
    config.no_fit = NoFitPolicy::refuse;
    Arbiter arbiter(config, 64);
    constexpr Bytes kTotal = 24 * kGiB;
    Snapshot snapshot{0, kTotal, kTotal, {}};
    for (std::uint32_t slot = 1; slot <= 5; ++slot) arbiter.handle(event::Joined{{slot, 1}}, snapshot);
    // Slots 2, 3 and 4 each hold a model 7 (slot 4's on another device, so that it is no
    // candidate for this load); the asker (slot 1) keeps slot 2's and slot 3's, and names a
    // model of slot 9 (nobody) and one that slot 4 does not hold (8).
    for (std::uint32_t slot = 2; slot <= 4; ++slot) {
        const std::uint32_t device = slot == 4 ? 1 : 0;
        arbiter.handle(event::Registered{{slot, 1}, ModelRegistered{7, 7, kGiB, kGiB, device, 0, 0, 0}}, snapshot);
    }
    AdmissionRequest request{};
    request.streams = 1;
    request.bytes = 4 * kGiB;
    const std::uint64_t keep[] = {machine_model_key(2, 7), machine_model_key(3, 7), machine_model_key(9, 7),
                                  machine_model_key(4, 8)};
    request.keep_loaded_count = 4;
    snapshot.device_free = 2 * kGiB;  // outside the ledger: only the siblings' caches can give more
    const auto actions =
        arbiter.handle(event::Admission{{1, 1}, 1, request, {std::begin(keep), std::end(keep)}}, snapshot);

    std::set<std::uint32_t> asked;
    for (const auto& action : actions) {
        if (const auto* release = std::get_if<action::SendPartialRelease>(&action)) asked.insert(release->to.slot);
        // The kept models are no candidates, and slot 4's is on another device.
        CHECK_FALSE(std::holds_alternative<action::SendDetach>(action));
        CHECK_FALSE(std::holds_alternative<action::SendPartialUnload>(action));
    }
    CHECK(asked == std::set<std::uint32_t>{4, 5});
}

TEST_CASE("a copied ledger keeps its own order: changing the copy leaves the original whole") {
    Ledger original(16);
    for (std::uint64_t id = 1; id <= 6; ++id) {
        REQUIRE(original.apply_registered(1 + static_cast<std::uint32_t>(id % 2), 1,
                                          ModelRegistered{id, id, id * kMiB, id * kMiB, 0, 0, 0, 0}));
    }
    const std::vector<std::size_t> before = eviction_order(original, EvictionQuery{0, {}});
    Ledger copy = original;
    copy.erase_owner(1);
    REQUIRE(copy.find(2, 1, 1));  // slot 2 holds the odd ids
    REQUIRE(copy.apply_unloaded(2, 1, UnloadReceipt{1, kMiB, kMiB, 1, 0, 0, {}}));
    CHECK(copy.size() == 3);
    CHECK(eviction_order(copy, EvictionQuery{0, {}}).size() == 3);
    CHECK(eviction_order(original, EvictionQuery{0, {}}) == before);
    CHECK(original.size() == 6);
    CHECK(original.loaded_on(0) == 21 * kMiB);
    Ledger assigned(1);
    assigned = copy;
    assigned.erase_owner(2);
    CHECK(assigned.size() == 0);
    CHECK(copy.size() == 3);
    CHECK(eviction_order(copy, EvictionQuery{0, {}}).size() == 3);
}
