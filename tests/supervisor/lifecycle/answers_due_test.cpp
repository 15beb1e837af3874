// What a participant's life owes: a receipt settles only a release or an eviction that went
// into its ring, one each, a deferred one settles nothing, and whatever it is sent the
// record stays bounded.
#include <catch2/catch.hpp>

#include "shared/memory_arithmetic.hpp"
#include "shared/message_codec.hpp"
#include "supervisor/lifecycle/answers_due.hpp"

using namespace comfy;
using comfy::supervisor::AnswersDue;

TEST_CASE("a release receipt settles one release of its kind that was sent, and names what it asked") {
    AnswersDue due(4);
    CHECK_FALSE(due.settle_release(MessageType::full_release, false));  // nothing asked yet
    due.sent(encode(FullRelease{0, 0}, 1));
    due.sent(encode(ReleasePins{3 * kGiB}, 1));
    due.sent(encode(ReleasePins{kGiB}, 1));
    CHECK_FALSE(due.settle_release(MessageType::partial_release, false));  // another kind
    CHECK(due.settle_release(MessageType::full_release, true) == 0u);      // deferred: still due
    CHECK(due.settle_release(MessageType::full_release, false) == 0u);
    CHECK_FALSE(due.settle_release(MessageType::full_release, false));     // answered already
    CHECK(due.settle_release(MessageType::release_pins, false) == 3 * kGiB);
    CHECK(due.settle_release(MessageType::release_pins, false) == 3 * kGiB);
    CHECK_FALSE(due.settle_release(MessageType::release_pins, false));
    CHECK_FALSE(due.settle_release(MessageType::hello, false));
}

TEST_CASE("an unload receipt settles one eviction of its model, and a new life owes nothing") {
    AnswersDue due(2);
    due.sent(encode(PartialUnload{7, kGiB}, 1));
    due.sent(encode(Detach{7}, 1));
    due.sent(encode(Detach{8}, 1));
    due.sent(encode(Detach{9}, 1));  // past the limit of models: never counted as asked
    CHECK_FALSE(due.settle_eviction(5, false));
    CHECK(due.settle_eviction(7, true));
    CHECK(due.settle_eviction(7, false));
    CHECK(due.settle_eviction(7, false));
    CHECK_FALSE(due.settle_eviction(7, false));
    CHECK_FALSE(due.settle_eviction(9, false));
    due.sent(encode(FullRelease{0, 0}, 1));
    due.clear();
    CHECK_FALSE(due.settle_eviction(8, false));
    CHECK_FALSE(due.settle_release(MessageType::full_release, false));
}
