// A new prompt's cast_epoch_boundary reaches the participants it concerns and no other:
// those that ran a node since their last one, a busy one at every boundary while it stays
// busy, an idle one for two boundaries after its last node; never an earlier life's.
#include <catch2/catch.hpp>

#include "supervisor/memory/epoch_boundaries.hpp"

#include <boost/asio/io_context.hpp>

#include <memory>
#include <set>
#include <vector>

using namespace comfy;
using namespace comfy::supervisor;

namespace {

struct Participants : WorkerAccess {
    explicit Participants(std::uint32_t count) {
        for (std::uint32_t slot = 0; slot < count; ++slot) {
            PackConfig pack;
            pack.name = "p" + std::to_string(slot);
            list.push_back(std::make_unique<WorkerProcess>(pack, slot, ParticipantKind::worker, io, 16));
            list.back()->generation = 1;
            list.back()->state = ParticipantState::ready;
        }
    }
    const std::vector<std::unique_ptr<WorkerProcess>>& workers() override { return list; }
    WorkerProcess* live(std::uint32_t slot, std::uint32_t generation) override {
        return list.at(slot)->generation == generation ? list.at(slot).get() : nullptr;
    }
    void deliver(WorkerProcess& worker, const MessageSlot& message) override {
        const auto decoded = decode(message);
        REQUIRE(decoded.ok());
        REQUIRE(decoded.message.type() == MessageType::cast_epoch_boundary);
        CHECK(decoded.message.header.generation == worker.generation);
        sent.insert(worker.slot);
    }
    void terminate(WorkerProcess&, const std::string&) override {}
    void log_about(const WorkerProcess&, const std::string&, std::string, LogFields) override {}
    void happened(LogLevel, const WorkerProcess&, const char*, const std::string&, nlohmann::json) override {}
    bool shutting_down() const noexcept override { return false; }
    void start_worker(WorkerProcess&) override {}
    void keep_stopped(WorkerProcess&) override {}

    // The slots the boundary of `epoch` reached.
    std::set<std::uint32_t> boundary(EpochBoundaries& epochs, std::uint64_t epoch) {
        sent.clear();
        epochs.start_epoch(epoch);
        return sent;
    }

    boost::asio::io_context io;
    std::vector<std::unique_ptr<WorkerProcess>> list;
    std::set<std::uint32_t> sent;
};

using Slots = std::set<std::uint32_t>;

}  // namespace

TEST_CASE("a prompt's epoch boundary reaches only the participants that ran a node since their last one") {
    Participants p(6);
    EpochBoundaries epochs(p);
    CHECK(p.boundary(epochs, 1).empty());  // nobody ran anything: nobody holds anything

    epochs.node_started(*p.list[2]);
    epochs.node_started(*p.list[4]);
    CHECK(p.boundary(epochs, 2) == Slots{2, 4});
    // Idle since: once more (a run of nodes may have reached into that prompt), then no more.
    CHECK(p.boundary(epochs, 3) == Slots{2, 4});
    CHECK(p.boundary(epochs, 4).empty());
    CHECK(epochs.concerned() == 0);

    // A repeated or older epoch is no new prompt.
    epochs.node_started(*p.list[1]);
    CHECK(p.boundary(epochs, 4).empty());
    CHECK(p.boundary(epochs, 3).empty());
    CHECK(p.boundary(epochs, 5) == Slots{1});
}

TEST_CASE("a busy participant gets every boundary while it stays busy, and an ended life none") {
    Participants p(4);
    EpochBoundaries epochs(p);
    p.list[3]->state = ParticipantState::busy;
    epochs.node_started(*p.list[3]);
    epochs.node_started(*p.list[1]);
    for (std::uint64_t epoch = 1; epoch <= 5; ++epoch) CHECK(p.boundary(epochs, epoch).count(3) == 1);
    p.list[3]->state = ParticipantState::ready;
    CHECK(p.boundary(epochs, 6) == Slots{3});
    CHECK(p.boundary(epochs, 7) == Slots{3});
    CHECK(p.boundary(epochs, 8).empty());

    // Slot 2 ran a node, then its life ended and a new one began: the new life holds nothing.
    epochs.node_started(*p.list[2]);
    p.list[2]->generation = 2;
    CHECK(p.boundary(epochs, 9).empty());
    // One that is no longer up (draining) is not sent one either.
    epochs.node_started(*p.list[0]);
    p.list[0]->state = ParticipantState::draining;
    CHECK(p.boundary(epochs, 10).empty());
    CHECK(epochs.concerned() == 0);
}
