// Upstream's memory arithmetic, checked against figures that Python computes from
// comfy/model_management.py's own expressions (printed with repr(), so every bit counts).
#include <catch2/catch.hpp>

#include "shared/memory_arithmetic.hpp"

using namespace comfy;

TEST_CASE("minimum inference memory is 1024**3 * 0.8 plus the reserve, a float") {
    // 0.8 x 2^30 = 858,993,459.2; plus 400 MiB = 419,430,400.
    CHECK(minimum_inference_memory(kDefaultReserve) == 1'278'423'859.2);
    CHECK(minimum_inference_memory(0) == 858'993'459.2);
    CHECK(minimum_inference_memory(kGiB) == 1'932'735'283.2);
}

TEST_CASE("the admission target is W x 1.1 + max(minimum inference, forward + reserve), unrounded") {
    // 6 GiB of weights, 2 streams of a 256 MiB tensor: forward + reserve = 912 MiB, below
    // the minimum, so the minimum counts. Python: 6*1024**3*1.1 + 1278423859.2.
    CHECK(admission_target(6 * kGiB, 256 * kMiB, 2, kDefaultReserve) == 8'365'119'897.6);
    // 1 GiB of weights, 2 streams of a 1 GiB tensor: forward + reserve = 2,566,914,048
    // beats the minimum.
    CHECK(admission_target(kGiB, kGiB, 2, kDefaultReserve) == 3'748'030'054.4);
    // Nothing to load still needs the inference minimum, fraction and all: a machine with
    // exactly 1,278,423,859 bytes free is 0.2 bytes short, as upstream sees it.
    CHECK(admission_target(0, 0, 1, kDefaultReserve) == 1'278'423'859.2);
    CHECK(memory_to_free(admission_target(0, 0, 1, kDefaultReserve), 1'278'423'859) > 0);
    CHECK_FALSE(memory_to_free(admission_target(0, 0, 1, kDefaultReserve), 1'278'423'860) > 0);
    // A larger --reserve-vram raises both terms.
    CHECK(admission_target(0, 0, 1, kGiB) == 1'932'735'283.2);
    // 2 GiB of weights lands on a whole number: 2362232012.8000002 + 1278423859.2.
    CHECK(admission_target(2 * kGiB, 0, 1, kDefaultReserve) == 3'640'655'872.0);
}

TEST_CASE("a shortfall below the loaded bytes is a partial unload of its ceiling, and one equal to them detaches") {
    CHECK(unloads_partially(0.2, 2 * kGiB));
    CHECK(whole_bytes_up(0.2) == 1);
    CHECK(whole_bytes_up(268'435'455.4) == 268'435'456);
    CHECK(whole_bytes_up(268'435'456.0) == 268'435'456);
    CHECK_FALSE(unloads_partially(268'435'456.0, 256 * kMiB));  // upstream: memory_to_free >= loaded: detach
    CHECK(unloads_partially(268'435'455.9, 256 * kMiB));
    CHECK(whole_bytes_up(-3.0) == 0);
}

TEST_CASE("free for an asker counts only its own allocator cache") {
    CHECK(free_for_asker(5 * kGiB, 3 * kGiB, 2 * kGiB) == 6 * kGiB);
    CHECK(free_for_asker(5 * kGiB, kGiB, 2 * kGiB) == 5 * kGiB);  // active above reserved: no cache
    CHECK(free_for_asker(0, 0, 0) == 0);
}

TEST_CASE("the published reserve adds what others hold unseen, capped at 0.75 of the device") {
    CHECK(published_reserve(kDefaultReserve, 0, 24 * kGiB) == kDefaultReserve);
    CHECK(published_reserve(kDefaultReserve, 6 * kGiB, 24 * kGiB) == kDefaultReserve + 6 * kGiB);
    CHECK(published_reserve(kDefaultReserve, 30 * kGiB, 24 * kGiB) == 18 * kGiB);
}
