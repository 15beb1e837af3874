// The message pump visits only the participants with work: a doorbell that rings puts its
// participant in the turn list, a round visits those and no other, an idle participant is
// neither visited nor armed again, and a participant with more than a turn's messages
// gets the next round too. In one process: the rings are in local memory and this test
// writes them as the participants would.
#include <catch2/catch.hpp>

#include "supervisor/lifecycle/message_pump.hpp"

#include <boost/asio/io_context.hpp>

#include <unistd.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <vector>

using namespace comfy;
using namespace comfy::supervisor;

namespace {

constexpr std::uint32_t kRingSlots = 128;  // room for more than a turn's messages

// Three participants whose rings to the supervisor live here; every other part of the
// supervisor is a stub.
struct Participants : WorkerAccess {
    explicit Participants(std::uint32_t count) {
        for (std::uint32_t slot = 0; slot < count; ++slot) {
            PackConfig pack;
            pack.name = "p" + std::to_string(slot);
            auto worker = std::make_unique<WorkerProcess>(pack, slot, ParticipantKind::worker, io, 16);
            worker->generation = 1;
            worker->process.pid = ::getpid();  // alive, as far as the pump can tell
            rings.push_back(std::unique_ptr<std::byte[], decltype(&std::free)>(
                static_cast<std::byte*>(std::aligned_alloc(ipc::kCacheLine, ipc::ring_bytes<MessageSlot>(kRingSlots))),
                &std::free));
            ipc::ring_initialize<MessageSlot>(rings.back().get(), kRingSlots);
            worker->from_worker.emplace(ipc::ring_in_block<MessageSlot>(rings.back().get(), kRingSlots), kRingSlots);
            list.push_back(std::move(worker));
        }
    }
    ~Participants() {
        for (auto& worker : list) worker->process.pid = -1;  // nothing to reap
    }

    // The participant's end of its ring, ringing the doorbell the pump gave its life.
    ipc::RingProducer<MessageSlot> producer(std::uint32_t slot) {
        return ipc::RingProducer<MessageSlot>(ipc::ring_in_block<MessageSlot>(rings[slot].get(), kRingSlots), kRingSlots,
                                              &*list[slot]->pump.doorbell);
    }

    const std::vector<std::unique_ptr<WorkerProcess>>& workers() override { return list; }
    WorkerProcess* live(std::uint32_t slot, std::uint32_t) override { return list.at(slot).get(); }
    void deliver(WorkerProcess&, const MessageSlot&) override {}
    void terminate(WorkerProcess& worker, const std::string&) override { terminated.push_back(worker.slot); }
    void log_about(const WorkerProcess&, const std::string&, std::string, LogFields) override {}
    void happened(LogLevel, const WorkerProcess&, const char*, const std::string&, nlohmann::json) override {}
    bool shutting_down() const noexcept override { return false; }
    void start_worker(WorkerProcess&) override {}
    void keep_stopped(WorkerProcess&) override {}

    boost::asio::io_context io;
    std::vector<std::unique_ptr<std::byte[], decltype(&std::free)>> rings;
    std::vector<std::unique_ptr<WorkerProcess>> list;
    std::vector<std::uint32_t> terminated;
};

// What the pump handed over: each message's sender and number, each turn, each round.
struct Heard {
    std::vector<std::pair<std::uint32_t, std::uint64_t>> messages;
    std::map<std::uint32_t, int> turns;
    int rounds = 0;
};

MessageSlot numbered(std::uint64_t n) {
    MessageSlot slot{};
    slot.header.correlation = n;
    return slot;
}

// Runs the loop until it has nothing left to do (every participant armed and quiet).
void settle(boost::asio::io_context& io) {
    io.restart();
    io.poll();
}

// `count` participants, each watched by a started pump that notes what it hands over.
struct Pumped {
    explicit Pumped(std::uint32_t count)
        : p(count),
          pump(p.io, p,
               {[this](WorkerProcess& w, const MessageSlot& m) { heard.messages.emplace_back(w.slot, m.header.correlation); },
                [this](WorkerProcess& w) { ++heard.turns[w.slot]; }, [this] { ++heard.rounds; }}) {
        for (auto& worker : p.list) pump.watch(*worker);
        pump.start();
    }
    ~Pumped() { pump.stop(); }

    // Runs the loop for up to `waits` doorbells, or until `done()`.
    template <class Done>
    void run_until(Done done, int waits = 10) {
        for (int i = 0; i < waits && !done(); ++i) {
            p.io.restart();
            p.io.run_one();
            settle(p.io);
        }
    }

    Participants p;
    Heard heard;
    MessagePump pump;
};

}  // namespace

TEST_CASE("the message pump visits only the participants whose doorbell rang") {
    Pumped t(3);
    settle(t.p.io);
    CHECK(t.heard.rounds == 0);  // nobody rang: no round at all

    auto one = t.p.producer(1);
    REQUIRE(one.try_push(numbered(10)) == ipc::PushResult::ok);
    t.run_until([&] { return !t.heard.messages.empty(); });
    CHECK(t.heard.messages == std::vector<std::pair<std::uint32_t, std::uint64_t>>{{1, 10}});
    CHECK(t.heard.turns == std::map<std::uint32_t, int>{{1, 1}});
    CHECK(t.heard.rounds == 1);

    // Two more ring; the one that stays quiet is never visited.
    auto zero = t.p.producer(0);
    auto two = t.p.producer(2);
    REQUIRE(two.try_push(numbered(20)) == ipc::PushResult::ok);
    REQUIRE(zero.try_push(numbered(30)) == ipc::PushResult::ok);
    t.run_until([&] { return t.heard.messages.size() == 3; });
    REQUIRE(t.heard.messages.size() == 3);
    CHECK(t.heard.turns == std::map<std::uint32_t, int>{{0, 1}, {1, 1}, {2, 1}});

    // Ring 1 again: it was armed again after its turn, so its doorbell still works.
    REQUIRE(one.try_push(numbered(11)) == ipc::PushResult::ok);
    t.run_until([&] { return t.heard.messages.size() == 4; });
    CHECK(t.heard.messages.back() == std::pair<std::uint32_t, std::uint64_t>{1, 11});
    CHECK(t.heard.turns == std::map<std::uint32_t, int>{{0, 1}, {1, 2}, {2, 1}});
    CHECK(t.p.terminated.empty());
}

TEST_CASE("a participant with more than a turn's messages gets the next round too, in order") {
    Pumped t(2);
    auto zero = t.p.producer(0);
    const int count = MessagePump::kMessagesPerTurn + 10;
    for (int n = 0; n < count; ++n) REQUIRE(zero.try_push(numbered(static_cast<std::uint64_t>(n))) == ipc::PushResult::ok);
    t.run_until([&] { return t.heard.messages.size() == static_cast<std::size_t>(count); });
    REQUIRE(t.heard.messages.size() == static_cast<std::size_t>(count));
    for (int n = 0; n < count; ++n) CHECK(t.heard.messages[static_cast<std::size_t>(n)].second == static_cast<std::uint64_t>(n));
    CHECK(t.heard.turns == std::map<std::uint32_t, int>{{0, 2}});
    CHECK(t.heard.rounds == 2);
}

TEST_CASE("a corrupt ring stops its writer alone, and a forgotten life is not visited") {
    Pumped t(2);
    // Participant 0 pushes, then its life ends before the loop runs: the ring is not read.
    auto zero = t.p.producer(0);
    REQUIRE(zero.try_push(numbered(1)) == ipc::PushResult::ok);
    t.pump.forget(*t.p.list[0]);
    // Participant 1 writes a head a lap and more ahead of the tail, then rings.
    auto* side = static_cast<ipc::RingProducerSide*>(
        ipc::ring_in_block<MessageSlot>(t.p.rings[1].get(), kRingSlots).producer_side);
    // Relaxed: this thread is the only one here; the doorbell's write orders it for the pump.
    side->head.store(kRingSlots * 3, std::memory_order_relaxed);
    t.p.list[1]->pump.doorbell->signal();
    t.run_until([&] { return !t.p.terminated.empty(); }, 5);
    CHECK(t.p.terminated == std::vector<std::uint32_t>{1});
    CHECK(t.heard.messages.empty());
    CHECK(t.heard.turns.count(0) == 0);
}
