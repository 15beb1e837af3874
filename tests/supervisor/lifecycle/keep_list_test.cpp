// The keep_loaded list an admission gathers from its admission_keep messages: every key
// in order, bounded, and matched against the count its request names.
#include <catch2/catch.hpp>

#include "supervisor/lifecycle/keep_list.hpp"

using namespace comfy;
using comfy::supervisor::KeepList;

namespace {
AdmissionKeep keys_of(std::uint32_t first, std::uint32_t count) {
    AdmissionKeep keep{};
    keep.count = count;
    for (std::uint32_t i = 0; i < count; ++i) keep.keys[i] = machine_model_key(1, first + i);
    return keep;
}
}  // namespace

TEST_CASE("a keep list gathers every message's keys, in order, for the request of the same correlation") {
    KeepList list(64);
    CHECK(list.add(5, keys_of(1, kKeepKeysPerMessage)).empty());
    CHECK(list.add(5, keys_of(13, 3)).empty());
    std::string error;
    const auto keys = list.take(5, 15, error);
    CHECK(error.empty());
    REQUIRE(keys.size() == 15);
    CHECK(keys.front() == machine_model_key(1, 1));
    CHECK(keys.back() == machine_model_key(1, 15));
    CHECK(list.take(6, 0, error).empty());  // taken: the next request starts empty
    CHECK(error.empty());
}

TEST_CASE("keys sent for a request that never came are not given to the next one") {
    KeepList list(64);
    CHECK(list.add(5, keys_of(1, 2)).empty());
    std::string error;
    CHECK(list.take(6, 0, error).empty());
    CHECK(error.empty());
    CHECK(list.add(7, keys_of(1, 2)).empty());
    CHECK(list.add(8, keys_of(3, 1)).empty());
    CHECK(list.take(8, 1, error).size() == 1);
}

TEST_CASE("a keep list past the limit, or a count its messages do not match, is an error line") {
    KeepList list(20);
    CHECK(list.add(1, keys_of(1, kKeepKeysPerMessage)).empty());
    CHECK(list.add(1, keys_of(13, 9)) == "asked to keep more models loaded than the ledger holds (20)");
    std::string error;
    CHECK(list.take(1, 13, error).empty());
    CHECK(error == "sent an admission_request keeping 13 models after admission_keep messages naming 12");
}
