#include "ipc/futex.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <ctime>

namespace comfy::ipc {

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t),
              "the futex syscall needs the atomic to be a bare 32-bit word");
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

namespace {
std::uint32_t* raw(std::atomic<std::uint32_t>& word) noexcept {
    return reinterpret_cast<std::uint32_t*>(&word);
}
}  // namespace

FutexWaitResult futex_wait_shared(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                                  std::chrono::nanoseconds timeout) noexcept {
    if (timeout.count() <= 0) return FutexWaitResult::timed_out;
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(timeout);
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(secs.count());
    ts.tv_nsec = static_cast<long>((timeout - secs).count());
    // FUTEX_WAIT without FUTEX_PRIVATE_FLAG: the key is the shared page, not this mm.
    const long rc = ::syscall(SYS_futex, raw(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
    if (rc == 0) return FutexWaitResult::woken;
    switch (errno) {
        case EAGAIN: return FutexWaitResult::value_changed;
        case ETIMEDOUT: return FutexWaitResult::timed_out;
        default: return FutexWaitResult::interrupted;
    }
}

void futex_wake_shared(std::atomic<std::uint32_t>& word, int count) noexcept {
    ::syscall(SYS_futex, raw(word), FUTEX_WAKE, count, nullptr, nullptr, 0);
}

}  // namespace comfy::ipc
