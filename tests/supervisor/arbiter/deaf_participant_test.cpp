// Deaf participants: an owner that lets a command go unanswered past the answer time-out
// is passed over until it answers again, so that a load waits at most one answer time-out
// per deaf participant, however many models it holds (issue 20: 682 one-MiB models of one
// silent pack once stalled every other load for 57 minutes, 5 s each).
#include <catch2/catch.hpp>

#include "tests/supervisor/arbiter/arbiter_world.hpp"

#include <random>
#include <set>

using namespace comfy;
using namespace comfy::arbiter;
using namespace comfy::arbiter::test;

namespace {

constexpr std::uint64_t kTimeout = ArbiterConfig{}.answer_timeout_ms;
constexpr std::uint64_t kTick = 100;  // the supervisor ticks the arbiter about this often

// What a run of the world decided, with the time each admission was answered.
struct Run {
    std::vector<Action> actions;
    std::map<std::uint64_t, std::uint64_t> answered_at;  // correlation -> now
};

// Owners in `silent` never answer; every other owner carries out every command at once
// (a partial unload or detach freeing what is asked, a partial release freeing nothing).
void answer_all_but(World& world, const std::set<std::uint32_t>& silent, std::vector<Action> actions, Run& run) {
    for (std::size_t next = 0; next < actions.size(); ++next) {
        std::vector<Action> more;
        const Action& a = actions[next];
        if (const auto* grant = std::get_if<action::Grant>(&a)) run.answered_at.emplace(grant->correlation, world.now);
        if (const auto* refuse = std::get_if<action::Refuse>(&a)) run.answered_at.emplace(refuse->correlation, world.now);
        if (const auto* d = std::get_if<action::SendDetach>(&a); d && !silent.count(d->to.slot)) {
            more = world.detach_and_answer(d->to.slot, d->command.model_id);
        } else if (const auto* p = std::get_if<action::SendPartialUnload>(&a); p && !silent.count(p->to.slot)) {
            more = world.free_and_answer(p->to.slot, p->command.model_id, p->command.bytes, p->command.bytes);
        } else if (const auto* r = std::get_if<action::SendPartialRelease>(&a); r && !silent.count(r->to.slot)) {
            ReleaseReceipt receipt{};
            receipt.release_type = static_cast<std::uint16_t>(MessageType::partial_release);
            receipt.bytes_requested = r->command.bytes;
            more = world.send(event::Released{r->to, receipt});
        }
        actions.insert(actions.end(), more.begin(), more.end());
    }
    run.actions.insert(run.actions.end(), actions.begin(), actions.end());
}

// Asks for `load` as slot 1 with `correlation`, keeping `keep`, then ticks every kTick ms,
// the owners answering as above, until it is answered or 20 answer time-outs have passed.
Run admit(World& world, const std::set<std::uint32_t>& silent, Bytes load, std::uint64_t correlation,
          std::vector<std::uint64_t> keep = {}) {
    constexpr std::uint64_t give_up_ms = 20 * kTimeout;
    Run run;
    const std::uint64_t start = world.now;
    answer_all_but(world, silent, world.send(event::Admission{{1, 1}, correlation, load_of(load), std::move(keep)}),
                   run);
    while (!run.answered_at.count(correlation) && world.now - start < give_up_ms) {
        world.now += kTick;
        answer_all_but(world, silent, world.send(event::Tick{}), run);
    }
    return run;
}

// Eviction commands sent to `slot`.
std::size_t commands_to(const std::vector<Action>& actions, std::uint32_t slot) {
    std::size_t sent = 0;
    for (const auto& a : actions) {
        if (const auto* d = std::get_if<action::SendDetach>(&a)) sent += d->to.slot == slot;
        if (const auto* p = std::get_if<action::SendPartialUnload>(&a)) sent += p->to.slot == slot;
    }
    return sent;
}

}  // namespace

TEST_CASE("a deaf owner of 682 small models costs a load one answer time-out, not one per model") {
    World world({}, 24 * kGiB, 1024);
    for (std::uint32_t slot = 1; slot <= 3; ++slot) world.join(slot);
    // Its quota of one-MiB models: equally loaded and referenced, the smaller go first.
    for (std::uint64_t id = 1; id <= 682; ++id) world.load(2, model(id, kMiB, kMiB));
    world.load(3, model(1000, 12 * kGiB, 12 * kGiB));

    Run run = admit(world, {2}, 12 * kGiB, 1);
    REQUIRE(run.answered_at.count(1));
    CHECK(only<action::Grant>(run.actions).size() == 1);
    CHECK(run.answered_at[1] == kTimeout);  // the first tick at or past the time-out
    CHECK(commands_to(run.actions, 2) == 1);
    CHECK(commands_to(run.actions, 3) == 1);
    const auto deafness = only<action::Deafness>(run.actions);
    REQUIRE(deafness.size() == 1);
    CHECK(deafness[0].who.slot == 2);
    CHECK(deafness[0].who.generation == 1);
    CHECK(deafness[0].deaf);
    CHECK(world.arbiter.deaf().passed_over_count() == 681);

    world.send(event::Busy{{1, 1}, false});  // its node ended: the grant no longer holds memory
    // Slot 3's model, partly offloaded now, would go first: kept, slot 2's are the candidates.
    const std::vector<std::uint64_t> keep{machine_model_key(3, 1000)};
    SECTION("a later load passes over its models at once, without waiting on it again") {
        run = admit(world, {2}, 13 * kGiB, 2, keep);
        REQUIRE(run.answered_at.count(2));
        CHECK(run.answered_at[2] == kTimeout);  // answered in the decision that asked
        CHECK(only<action::Grant>(run.actions).size() == 1);
        // Nobody is asked for a release either: slot 2 is deaf, slot 3 holds the kept model.
        CHECK(only<action::SendPartialRelease>(run.actions).empty());
        CHECK(commands_to(run.actions, 2) == 0);
        CHECK(only<action::Deafness>(run.actions).empty());
        CHECK(world.arbiter.deaf().passed_over_count() == 681 + 682);
    }
    SECTION("once it answers, it is asked again as any owner") {
        // Its late answer to the eviction that timed out: it freed that model.
        const auto asked = only<action::SendDetach>(run.actions);
        REQUIRE(!asked.empty());
        REQUIRE(asked[0].to.slot == 2);
        auto actions = world.detach_and_answer(2, asked[0].command.model_id);
        const auto heard = only<action::Deafness>(actions);
        REQUIRE(heard.size() == 1);
        CHECK(heard[0].who.slot == 2);
        CHECK_FALSE(heard[0].deaf);
        run = admit(world, {}, 13 * kGiB, 2, keep);
        CHECK(commands_to(run.actions, 2) > 0);
        CHECK(only<action::Grant>(run.actions).size() == 1);
        CHECK(world.arbiter.deaf().size() == 0);
    }
}

TEST_CASE("whatever the deaf owners hold, a load waits at most one answer time-out per deaf owner") {
    for (std::uint32_t seed = 1; seed <= 40; ++seed) {
        CAPTURE(seed);
        std::mt19937_64 random(seed);
        const auto pick = [&](std::uint64_t low, std::uint64_t high) {
            return std::uniform_int_distribution<std::uint64_t>(low, high)(random);
        };
        World world({}, 24 * kGiB, 1024);
        world.join(1);
        // Slots 2 to 1 + deaf are deaf; the next one or two answer honestly.
        const auto deaf_owners = static_cast<std::uint32_t>(pick(1, 3));
        const auto honest_owners = static_cast<std::uint32_t>(pick(1, 2));
        std::set<std::uint32_t> silent;
        std::uint64_t id = 1;
        for (std::uint32_t slot = 2; slot < 2 + deaf_owners; ++slot) {
            world.join(slot);
            silent.insert(slot);
            const auto models = pick(1, 150);
            for (std::uint64_t m = 0; m < models; ++m) {
                const Bytes size = pick(1, 16) * kMiB;
                world.load(slot, model(id++, size, size));
            }
        }
        for (std::uint32_t slot = 2 + deaf_owners; slot < 2 + deaf_owners + honest_owners; ++slot) {
            world.join(slot);
            const Bytes size = pick(4, 7) * kGiB;
            world.load(slot, model(id++, size, size));
        }
        // At least what is free: its target (1.1 times the load and more) always asks evictions.
        const Run run = admit(world, silent, world.snapshot().device_free + pick(0, 2) * kGiB, 1);
        REQUIRE(run.answered_at.count(1));
        CHECK(run.answered_at.at(1) <= deaf_owners * kTimeout);
        for (const auto slot : silent) CHECK(commands_to(run.actions, slot) <= 1);
    }
}

TEST_CASE("an owner that answers late is not waited on again by the same load, and is by the next") {
    World world;
    for (std::uint32_t slot = 1; slot <= 3; ++slot) world.join(slot);
    // The order: slot 2's small models, slot 3's model, then slot 2's large one.
    world.load(2, model(21, kMiB, kMiB));
    world.load(2, model(22, 2 * kMiB, 2 * kMiB));
    world.load(3, model(30, 4 * kGiB, 4 * kGiB));
    world.load(2, model(23, 16 * kGiB, 16 * kGiB));
    auto actions = world.send(event::Admission{{1, 1}, 1, load_of(6 * kGiB)});
    REQUIRE(commands_to(actions, 2) == 1);
    world.now = kTimeout;
    actions = world.send(event::Tick{});
    REQUIRE(only<action::Deafness>(actions).size() == 1);
    const auto partial = only<action::SendPartialUnload>(actions);
    REQUIRE(partial.size() == 1);
    CHECK(partial[0].to.slot == 3);
    // Slot 2 answers its eviction at last: it hears again.
    world.now += 500;
    actions = world.detach_and_answer(2, 21);
    REQUIRE(only<action::Deafness>(actions).size() == 1);
    CHECK_FALSE(only<action::Deafness>(actions)[0].deaf);
    // Slot 3 frees a fraction of what was asked, then the whole model, while memory outside
    // the ledger is taken: still short. Slot 2's large model is next in the order, but slot
    // 2 had its one time-out in this load: neither it nor a release is asked of it.
    actions = world.free_and_answer(3, 30, partial[0].command.bytes, kMiB);
    REQUIRE(only<action::SendDetach>(actions).size() == 1);
    world.other_use = 4 * kGiB;
    actions = world.detach_and_answer(3, 30);
    CHECK(commands_to(actions, 2) == 0);
    const auto releases = only<action::SendPartialRelease>(actions);
    REQUIRE(releases.size() == 1);
    CHECK(releases[0].to.slot == 3);
    ReleaseReceipt nothing{};
    nothing.release_type = static_cast<std::uint16_t>(MessageType::partial_release);
    actions = world.send(event::Released{{3, 1}, nothing});
    const auto grants = only<action::Grant>(actions);
    REQUIRE(grants.size() == 1);
    CHECK(grants[0].grant.shortfall > 0);  // policy admit: granted short, nothing more to ask

    // The next load asks slot 2 as any owner.
    actions = world.send(event::Admission{{1, 1}, 2, load_of(6 * kGiB)});
    CHECK(commands_to(actions, 2) == 1);
}

TEST_CASE("a stand-in unload that times out makes its owner deaf, and the next is answered without asking it") {
    World world;
    world.join(0);
    world.join(1);
    world.load(1, model(7, 4 * kGiB, 4 * kGiB));
    world.load(1, model(8, 4 * kGiB, 4 * kGiB));
    const auto answer_of = [](const std::vector<Action>& actions) {
        const auto answers = only<action::AnswerStandIn>(actions);
        REQUIRE(answers.size() == 1);
        return answers[0];
    };
    REQUIRE(commands_to(world.send(event::StandIn{{0, 1}, 1, standin_of(1, 7, kGiB)}), 1) == 1);
    world.now = kTimeout;
    auto actions = world.send(event::Tick{});
    CHECK(answer_of(actions).result.outcome == static_cast<std::uint32_t>(StandInOutcome::timed_out));
    REQUIRE(only<action::Deafness>(actions).size() == 1);
    CHECK(only<action::Deafness>(actions)[0].who.slot == 1);

    // The host's upstream loop goes on to the next stand-in: answered at once, nobody asked.
    actions = world.send(event::StandIn{{0, 1}, 2, standin_of(1, 8, kGiB)});
    CHECK(commands_to(actions, 1) == 0);
    CHECK(answer_of(actions).correlation == 2);
    CHECK(answer_of(actions).result.outcome == static_cast<std::uint32_t>(StandInOutcome::timed_out));
    CHECK(world.arbiter.unanswered(0) == 0);

    // Once it answers, its stand-ins go to it again.
    world.free_and_answer(1, 7, kGiB, kGiB);
    actions = world.send(event::StandIn{{0, 1}, 3, standin_of(1, 8, kGiB)});
    CHECK(commands_to(actions, 1) == 1);
    CHECK(only<action::AnswerStandIn>(actions).empty());
}

TEST_CASE("a sibling that lets its partial release time out is deaf and not asked again until it answers") {
    ArbiterConfig config;
    config.no_fit = NoFitPolicy::refuse;
    World world(config);
    for (std::uint32_t slot = 1; slot <= 3; ++slot) world.join(slot);
    world.other_use = 22 * kGiB;  // caches and buffers outside the ledger
    auto actions = world.send(event::Admission{{1, 1}, 1, load_of(4 * kGiB)});
    REQUIRE(only<action::SendPartialRelease>(actions).size() == 2);
    ReleaseReceipt nothing{};
    nothing.release_type = static_cast<std::uint16_t>(MessageType::partial_release);
    world.send(event::Released{{3, 1}, nothing});  // slot 3 answers, slot 2 never does
    world.now = kTimeout;
    actions = world.send(event::Tick{});
    const auto deafness = only<action::Deafness>(actions);
    REQUIRE(deafness.size() == 1);
    CHECK(deafness[0].who.slot == 2);
    CHECK(only<action::Refuse>(actions).size() == 1);

    // The next load asks slot 3 alone, and is answered when slot 3 is.
    actions = world.send(event::Admission{{1, 1}, 2, load_of(4 * kGiB)});
    const auto asked = only<action::SendPartialRelease>(actions);
    REQUIRE(asked.size() == 1);
    CHECK(asked[0].to.slot == 3);
    CHECK(only<action::Refuse>(world.send(event::Released{{3, 1}, nothing})).size() == 1);

    // Slot 2's late answer: it is asked again.
    CHECK(only<action::Deafness>(world.send(event::Released{{2, 1}, nothing})).size() == 1);
    actions = world.send(event::Admission{{1, 1}, 3, load_of(4 * kGiB)});
    CHECK(only<action::SendPartialRelease>(actions).size() == 2);
}

TEST_CASE("a deaf participant's next life is asked as any") {
    World world;
    for (std::uint32_t slot = 1; slot <= 3; ++slot) world.join(slot);
    world.load(2, model(20, kGiB, kGiB));
    world.load(3, model(30, 12 * kGiB, 12 * kGiB));
    Run run = admit(world, {2}, 12 * kGiB, 1);
    REQUIRE(only<action::Deafness>(run.actions).size() == 1);
    // It is restarted (memory.deaf_participant "restart", or an operator): its memory went
    // with it, and the new life's models are candidates as any.
    world.held.erase({2, 20});
    CHECK(only<action::Deafness>(world.send(event::Left{{2, 1}})).empty());
    CHECK(world.arbiter.deaf().size() == 0);
    world.send(event::Joined{{2, 2}});
    world.send(event::Registered{{2, 2}, model(20, 6 * kGiB, 6 * kGiB)});
    world.held[{2, 20}] = 6 * kGiB;
    world.send(event::Busy{{1, 1}, false});
    // Slot 3's model kept: the new life's model is the only candidate.
    const auto actions = world.send(event::Admission{{1, 1}, 2, load_of(8 * kGiB), {machine_model_key(3, 30)}});
    CHECK(commands_to(actions, 2) == 1);
}
