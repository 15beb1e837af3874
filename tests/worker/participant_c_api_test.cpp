// The participant library's C ABI at its edges, linked as a C program would link it:
// every failure is -1 (or NULL) with one line from comfy_participant_last_error(), and
// nothing is sent for a call that would have been refused.
#include <catch2/catch.hpp>

#include "worker/participant_c_api.h"

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace {
std::string last_error() { return comfy_participant_last_error(); }
}  // namespace

TEST_CASE("opening outside a supervisor fails with one line naming what is missing") {
    ::unsetenv("COMFY_SV_INSTANCE");
    CHECK(comfy_participant_open(0) == nullptr);
    CHECK(last_error().find("COMFY_SV_INSTANCE") != std::string::npos);
    CHECK(last_error().find('\n') == std::string::npos);
}

TEST_CASE("every call on a missing handle fails with one line, and close and the getters accept it") {
    comfy_participant* none = nullptr;
    CHECK(comfy_participant_register_model(none, 1, 1, 1024, 1024, 0, 0, 0, "x") == -1);
    CHECK(last_error().find("no participant") != std::string::npos);
    uint64_t figure = 7;
    CHECK(comfy_participant_device_free(none, &figure) == -1);
    CHECK(figure == 7);
    comfy_command command{};
    CHECK(comfy_participant_next_command(none, 0, &command) == -1);
    comfy_admission_answer answer{};
    CHECK(comfy_participant_request_admission(none, 0, 1024, 0, 1, 0, nullptr, 0, 0, &answer) == -1);
    CHECK(comfy_participant_ready(none, 0) == -1);
    CHECK(comfy_participant_slot(none) == 0);
    CHECK(comfy_participant_generation(none) == 0);
    comfy_participant_close(none);
}

// The bridge's wait: a word another thread (another process, in use) writes is seen as soon
// as it moves, and a word that stands still is given up on once the time ran out.
TEST_CASE("a watched word that moves is seen, one that stands still is given up on, and no word is none") {
    alignas(4) uint32_t word = 41;
    std::thread writer([&word] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::atomic_ref<uint32_t>(word).store(42, std::memory_order_release);  // as the peer counts a frame
    });
    // Ten seconds: only a word never seen to move would take them.
    CHECK(comfy_participant_watch_word(&word, 41, 10'000'000'000ULL) == 1);
    writer.join();
    const auto started = std::chrono::steady_clock::now();
    CHECK(comfy_participant_watch_word(&word, 42, 5'000'000ULL) == 0);
    CHECK(std::chrono::steady_clock::now() - started >= std::chrono::milliseconds(5));
    CHECK(comfy_participant_watch_word(nullptr, 0, 1'000'000ULL) == 0);
}
