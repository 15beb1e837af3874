#pragma once
// Process-shared futex wait and wake on a 32-bit word in shared memory.
// std::atomic::wait/notify cannot serve: libstdc++ uses private futexes (and a
// process-local waiter table), which never wake a waiter in another process.

#include <atomic>
#include <chrono>
#include <cstdint>

namespace comfy::ipc {

enum class FutexWaitResult { woken, value_changed, timed_out, interrupted };

// Sleeps while `word` still holds `expected`, at most `timeout`.
FutexWaitResult futex_wait_shared(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                                  std::chrono::nanoseconds timeout) noexcept;

// Wakes up to `count` waiters sleeping on `word`, in any process.
void futex_wake_shared(std::atomic<std::uint32_t>& word, int count) noexcept;

}  // namespace comfy::ipc
