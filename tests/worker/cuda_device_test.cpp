// The device factory and the CUDA backend. Meaningful with and without a GPU, and in builds
// with and without the CUDA toolkit: without a usable device every way of opening one fails
// with the same one-line reason; with one (detected at run time) allocations, pinned and
// registered host memory round-trip and the device's free memory follows. A WARN line says
// which path ran.
#include <catch2/catch.hpp>

#include "worker/device_factory.hpp"
#if COMFY_HAVE_CUDA
#include "worker/cuda_device.hpp"
#endif

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

using namespace comfy::worker;
using Catch::Matchers::Contains;

namespace {

constexpr const char* kNoCudaBuild = "this build has no CUDA support (the CUDA toolkit was not found at build time)";

bool one_line(const std::string& text) { return !text.empty() && text.find_first_of("\r\n") == std::string::npos; }

// The message `f` throws as std::runtime_error; fails the test when it throws nothing.
template <typename F>
std::string thrown_by(F&& f) {
    try {
        f();
    } catch (const std::runtime_error& error) {
        return error.what();
    }
    FAIL("expected a std::runtime_error, nothing was thrown");
    return {};
}

}  // namespace

TEST_CASE("the build says whether it has CUDA support") {
#if COMFY_HAVE_CUDA
    CHECK(built_with_cuda());
#else
    CHECK_FALSE(built_with_cuda());
    WARN("no CUDA device: " << kNoCudaBuild);
    CHECK(cuda_unavailable_reason(0) == std::string(kNoCudaBuild));
#endif
}

TEST_CASE("a bad CUDA device index always has a one-line reason and cannot be opened") {
    for (const int index : {64, -1}) {
        const auto reason = cuda_unavailable_reason(index);
        REQUIRE(reason.has_value());
        CHECK(one_line(*reason));
        if (built_with_cuda()) CHECK_THAT(*reason, Contains("CUDA device " + std::to_string(index) + " is not usable: "));
        const std::string error = thrown_by([&] { open_cuda_device(index); });
        CHECK(one_line(error));
        CHECK_THAT(error, Contains(*reason));
    }
}

TEST_CASE("CUDA device 0: the reason it is unusable and opening it agree") {
    const auto reason = cuda_unavailable_reason(0);
    if (reason) {
        WARN("no CUDA device: " << *reason);
        CHECK(one_line(*reason));
        const std::string error = thrown_by([] { open_cuda_device(0); });
        CHECK(one_line(error));
        CHECK_THAT(error, Contains(*reason));
        CHECK(error.size() > reason->size());  // plus what to do
#if COMFY_HAVE_CUDA
        CHECK_THAT(thrown_by([] { CudaDevice device(0); }), Contains(*reason));
#endif
    } else {
        WARN("CUDA device 0 is usable: opening it");
        REQUIRE(built_with_cuda());
        const auto device = open_cuda_device(0);
        REQUIRE(device != nullptr);
        CHECK(device->total_bytes() > 0);
        CHECK(device->free_bytes() <= device->total_bytes());
        CHECK(device->used_by_this_process() == 0);
        CHECK(device->pinned_by_this_process() == 0);
    }
}

TEST_CASE("resolving a device choice: simulated, CUDA, fallback or stop") {
    SECTION("simulated: nothing opened, nothing to explain") {
        const auto resolution = resolve_device_choice({DeviceChoice::Kind::simulated, 0, false});
        CHECK(resolution.cuda == nullptr);
        CHECK_FALSE(resolution.fallback_reason.has_value());
    }
    SECTION("an unusable CUDA device with fallback: the reason, no device") {
        const auto resolution = resolve_device_choice({DeviceChoice::Kind::cuda, 64, true});
        CHECK(resolution.cuda == nullptr);
        REQUIRE(resolution.fallback_reason.has_value());
        CHECK(*resolution.fallback_reason == *cuda_unavailable_reason(64));
    }
    SECTION("an unusable CUDA device without fallback: a one-line error with the reason") {
        const std::string error = thrown_by([] { resolve_device_choice({DeviceChoice::Kind::cuda, 64, false}); });
        CHECK(one_line(error));
        CHECK_THAT(error, Contains(*cuda_unavailable_reason(64)));
    }
    SECTION("CUDA device 0, with fallback: opened when usable, else the reason") {
        const auto reason = cuda_unavailable_reason(0);
        const auto resolution = resolve_device_choice({DeviceChoice::Kind::cuda, 0, true});
        if (reason) {
            WARN("no CUDA device: " << *reason);
            CHECK(resolution.cuda == nullptr);
            CHECK(resolution.fallback_reason == reason);
        } else {
            WARN("CUDA device 0 is usable: it was opened");
            CHECK(resolution.cuda != nullptr);
            CHECK_FALSE(resolution.fallback_reason.has_value());
        }
    }
}

#if COMFY_HAVE_CUDA

namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
// Room for the runtime's own bookkeeping and page rounding when comparing free memory.
constexpr std::uint64_t kSlack = 16 * kMiB;

// CUDA device 0, or null after checking that opening it fails with the reason and saying
// (WARN) that the no-device path ran.
std::unique_ptr<CudaDevice> device_0_or_explain() {
    if (const auto reason = cuda_unavailable_reason(0)) {
        WARN("no CUDA device: " << *reason);
        CHECK_THAT(thrown_by([] { CudaDevice device(0); }), Contains(*reason));
        return nullptr;
    }
    WARN("CUDA device 0 is usable: running on it");
    return std::make_unique<CudaDevice>(0);
}

}  // namespace

TEST_CASE("on a CUDA device, free memory drops by an allocation and comes back after release") {
    const auto device = device_0_or_explain();
    if (!device) return;
    // Warm up: the first allocation may also set up the runtime's own memory.
    REQUIRE(device->allocate(kMiB));
    device->release(kMiB);

    const std::uint64_t size = 256 * kMiB;
    const std::uint64_t before = device->free_bytes();
    REQUIRE(before > size + kSlack);
    REQUIRE(device->allocate(size));
    CHECK(device->used_by_this_process() == size);
    const std::uint64_t during = device->free_bytes();
    CHECK(during + size <= before);
    device->release(size);
    CHECK(device->used_by_this_process() == 0);
    const std::uint64_t after = device->free_bytes();
    CHECK(after + kSlack >= before);
    CHECK(after >= during + size - kSlack);
    device->synchronize();
}

TEST_CASE("on a CUDA device, release frees whole allocations, most recent first, until enough is freed") {
    const auto device = device_0_or_explain();
    if (!device) return;
    REQUIRE(device->allocate(1 * kMiB));
    REQUIRE(device->allocate(2 * kMiB));
    REQUIRE(device->allocate(4 * kMiB));
    CHECK(device->used_by_this_process() == 7 * kMiB);
    device->release(3 * kMiB);  // the 4 MiB allocation is enough
    CHECK(device->used_by_this_process() == 3 * kMiB);
    device->release(0);
    CHECK(device->used_by_this_process() == 3 * kMiB);
    device->release(1);  // a whole allocation: the 2 MiB one
    CHECK(device->used_by_this_process() == 1 * kMiB);
    device->release(100 * kMiB);  // more than held: everything
    CHECK(device->used_by_this_process() == 0);
    device->release(kMiB);  // nothing left: nothing happens
    CHECK(device->used_by_this_process() == 0);
}

TEST_CASE("on a CUDA device, an allocation larger than the device fails cleanly and the device stays usable") {
    const auto device = device_0_or_explain();
    if (!device) return;
    CHECK_FALSE(device->allocate(device->total_bytes() * 2));
    CHECK(device->used_by_this_process() == 0);
    REQUIRE(device->allocate(kMiB));
    CHECK(device->used_by_this_process() == kMiB);
    device->synchronize();
    device->release(kMiB);
}

TEST_CASE("on a CUDA device, pinned and registered host memory round-trip") {
    const auto device = device_0_or_explain();
    if (!device) return;
    REQUIRE(device->pin_host(64 * kMiB));
    REQUIRE(device->pin_host(kMiB));
    CHECK(device->pinned_by_this_process() == 65 * kMiB);
    device->unpin_host(1);  // the most recent block, whole
    CHECK(device->pinned_by_this_process() == 64 * kMiB);

    const std::size_t bytes = 2 * kMiB;
    void* buffer = std::aligned_alloc(4096, bytes);
    REQUIRE(buffer != nullptr);
    CHECK(device->register_host(buffer, bytes));
    CHECK(device->pinned_by_this_process() == 64 * kMiB + bytes);
    device->unpin_host(1000 * kMiB);  // pinned blocks only: the registered range stays
    CHECK(device->pinned_by_this_process() == bytes);
    device->unregister_host(buffer);
    CHECK(device->pinned_by_this_process() == 0);
    const std::string error = thrown_by([&] { device->unregister_host(buffer); });
    CHECK(one_line(error));
    CHECK_THAT(error, Contains("not registered"));
    std::free(buffer);
}

TEST_CASE("on a CUDA device, a CUDA error is one line naming the call and what to do") {
    const auto device = device_0_or_explain();
    if (!device) return;
    const std::size_t bytes = kMiB;
    void* buffer = std::aligned_alloc(4096, bytes);
    REQUIRE(buffer != nullptr);
    REQUIRE(device->register_host(buffer, bytes));
    const std::string error = thrown_by([&] { device->register_host(buffer, bytes); });  // already registered
    CHECK(one_line(error));
    CHECK_THAT(error, Contains("CUDA device 0: registering 1048576 bytes of host memory at "));
    CHECK_THAT(error, Contains("(cudaHostRegister: cudaErrorHostMemoryAlreadyRegistered); "));
    CHECK(device->pinned_by_this_process() == bytes);  // the failed second registration is not counted
    device->unregister_host(buffer);
    CHECK(device->pinned_by_this_process() == 0);
    std::free(buffer);
}

TEST_CASE("on a CUDA device, the destructor frees what the device still holds") {
    auto device = device_0_or_explain();
    if (!device) return;
    REQUIRE(device->allocate(kMiB));  // warm up
    device->release(kMiB);
    const std::uint64_t before = device->free_bytes();
    REQUIRE(device->allocate(256 * kMiB));
    REQUIRE(device->pin_host(16 * kMiB));
    CHECK(device->free_bytes() + 256 * kMiB <= before);
    device.reset();
    CudaDevice again(0);
    CHECK(again.free_bytes() + kSlack >= before);
    CHECK(again.used_by_this_process() == 0);
}

#endif  // COMFY_HAVE_CUDA
