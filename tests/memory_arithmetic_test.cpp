// Upstream's memory arithmetic, checked against figures worked by hand from
// comfy/model_management.py's formulas (see ../shared/reference/comfyui-model-management.md).
#include <catch2/catch.hpp>

#include "shared/memory_arithmetic.hpp"

using namespace comfy;

TEST_CASE("minimum inference memory is 0.8 GiB plus the reserve, truncated") {
    // 0.8 x 2^30 = 858,993,459.2; plus 400 MiB = 419,430,400.
    CHECK(minimum_inference_memory(kDefaultReserve) == 1'278'423'859);
    CHECK(minimum_inference_memory(0) == 858'993'459);
    CHECK(minimum_inference_memory(kGiB) == 858'993'459 + 1'073'741'824);
}

TEST_CASE("the admission target is int(W x 1.1) + max(minimum inference, forward + reserve)") {
    // 6 GiB of weights, 2 streams of a 256 MiB tensor: forward + reserve = 912 MiB, below
    // the 1,278,423,859 minimum, so the minimum counts: 7,086,696,038 + 1,278,423,859.
    CHECK(admission_target(6 * kGiB, 256 * kMiB, 2, kDefaultReserve) == 8'365'119'897);
    // 1 GiB of weights, 2 streams of a 1 GiB tensor: forward + reserve = 2,566,914,048
    // beats the minimum: 1,181,116,006 + 2,566,914,048.
    CHECK(admission_target(kGiB, kGiB, 2, kDefaultReserve) == 3'748'030'054);
    // Nothing to load still needs the inference minimum.
    CHECK(admission_target(0, 0, 1, kDefaultReserve) == 1'278'423'859);
    // A larger --reserve-vram raises both terms.
    CHECK(admission_target(0, 0, 1, kGiB) == 858'993'459 + kGiB);
}

TEST_CASE("the weight budget follows load_models_gpu's low-VRAM formula") {
    const Bytes inference = minimum_inference_memory(kDefaultReserve);
    // 10 GiB free, nothing loaded, NVIDIA ratio 0: cur - minimum = 9,458,994,381.
    CHECK(weight_budget(10 * kGiB, 0, inference, inference, 0.0) == 9'458'994'381);
    // The ratio term wins when the minimum is large: 0.4 x 4 GiB = 1,717,986,918.4.
    CHECK(weight_budget(4 * kGiB, 0, 4 * kGiB, inference, 0.4) == 1'717'986'918);
    // Nothing free and 2 GiB loaded: the budget is negative (unload 1,278,423,859).
    CHECK(weight_budget(0, 2 * kGiB, inference, inference, 0.0) == -1'278'423'859);
    // A zero budget becomes the smallest positive one, as upstream's 0.1.
    CHECK(weight_budget(inference, 0, inference, inference, 0.0) == 1);
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
