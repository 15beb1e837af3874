// A participant's outbox: answers counted, and what the others' doings send it kept once,
// so a participant that stops reading its ring cannot make it grow without bound.
#include <catch2/catch.hpp>

#include "shared/message_codec.hpp"
#include "supervisor/lifecycle/outbox.hpp"

using namespace comfy;
using namespace comfy::supervisor;

namespace {
MessageType type_of(const MessageSlot& m) { return static_cast<MessageType>(m.header.type); }

std::vector<MessageSlot> drain(Outbox& outbox) {
    std::vector<MessageSlot> out;
    while (!outbox.empty()) {
        out.push_back(outbox.front());
        outbox.pop_front();
    }
    return out;
}
}  // namespace

TEST_CASE("answers to the participant's own messages are counted until they leave") {
    Outbox outbox;
    outbox.push_back(encode(AdmissionGrant{}, 1, 7));
    outbox.push_back(encode(Detach{3}, 1));
    outbox.push_back(encode(PinGrant{1, 2}, 1, 8));
    outbox.push_back(encode(AdmissionRefused{}, 1, 9));
    outbox.push_back(encode(ReleaseNodeBoundary{1, 2, 0}, 1));
    CHECK(outbox.size() == 5);
    CHECK(outbox.answers() == 4);
    outbox.pop_front();
    CHECK(outbox.answers() == 3);
    outbox.pop_front();  // the detach is no answer
    CHECK(outbox.answers() == 3);
    outbox.clear();
    CHECK(outbox.empty());
    CHECK(outbox.answers() == 0);
}

TEST_CASE("a later release of a kind replaces the one still waiting, at the end") {
    Outbox outbox;
    outbox.push_back(encode(CastEpochBoundary{1}, 1));
    outbox.push_back(encode(WorkRequest{}, 1, 5));
    outbox.push_back(encode(FullRelease{0, 0}, 1));
    outbox.push_back(encode(CastEpochBoundary{2}, 1));
    const auto left = drain(outbox);
    REQUIRE(left.size() == 3);
    CHECK(type_of(left[0]) == MessageType::work_request);
    CHECK(type_of(left[1]) == MessageType::full_release);
    CHECK(type_of(left[2]) == MessageType::cast_epoch_boundary);
    CHECK(std::get<CastEpochBoundary>(decode(left[2]).message.payload).prompt_epoch == 2);
}

TEST_CASE("a later eviction of a model replaces the waiting one, and a detach is never weakened") {
    Outbox outbox;
    outbox.push_back(encode(PartialUnload{1, 100}, 1));
    outbox.push_back(encode(PartialUnload{2, 100}, 1));
    outbox.push_back(encode(PartialUnload{1, 300}, 1));  // replaces model 1's
    outbox.push_back(encode(Detach{2}, 1));              // replaces model 2's
    outbox.push_back(encode(PartialUnload{2, 50}, 1));   // model 2 is detached already
    const auto left = drain(outbox);
    REQUIRE(left.size() == 2);
    CHECK(std::get<PartialUnload>(decode(left[0]).message.payload).bytes == 300);
    CHECK(type_of(left[1]) == MessageType::detach);
}

TEST_CASE("a flood of releases and evictions for a participant that does not read stays one per kind and model") {
    Outbox outbox;
    for (std::uint64_t n = 1; n <= 100'000; ++n) {
        outbox.push_back(encode(CastEpochBoundary{n}, 1));
        outbox.push_back(encode(PartialRelease{n}, 1));
        outbox.push_back(encode(ReleasePins{n}, 1));
        outbox.push_back(encode(Detach{n % 10}, 1));
    }
    CHECK(outbox.size() == 3 + 10);
    CHECK(outbox.answers() == 0);
}
