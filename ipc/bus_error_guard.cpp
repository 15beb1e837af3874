#include "ipc/bus_error_guard.hpp"

#include "ipc/shm_segment.hpp"

#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

namespace comfy::ipc {

namespace {

// One guarded mapping. The handler may run on any thread, at any instruction, so a place
// is only lock-free atomics: `begin` is written last when a place is taken and first when
// it is given up, and 0 means free.
struct Place {
    std::atomic<std::uintptr_t> begin{0};
    std::atomic<std::uintptr_t> end{0};
    std::atomic<int> protection{0};
    std::atomic<bool> tripped{false};
};
static_assert(std::atomic<std::uintptr_t>::is_always_lock_free && std::atomic<bool>::is_always_lock_free,
              "a signal handler may use only lock-free atomics");

Place places[BusErrorGuard::kMaxGuards];
std::once_flag handler_installed;
std::mutex places_taken;  // guards taking a place against another thread doing the same; never in the handler

void on_bus_error(int, siginfo_t* info, void*) {
    const auto address = reinterpret_cast<std::uintptr_t>(info->si_addr);
    for (Place& place : places) {
        // Acquire: pairs with the release store that took the place, so `end` and
        // `protection` below are that guard's.
        const std::uintptr_t begin = place.begin.load(std::memory_order_acquire);
        // Relaxed: ordered after `begin` by the acquire above.
        const std::uintptr_t end = place.end.load(std::memory_order_relaxed);
        if (begin == 0 || address < begin || address >= end) continue;
        // mmap is a plain system call, safe in a handler. MAP_FIXED replaces the truncated
        // file's pages in one step; the faulting access is retried on the new ones.
        void* replaced = ::mmap(reinterpret_cast<void*>(begin), end - begin,
                                place.protection.load(std::memory_order_relaxed),  // Relaxed: as `end`
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        if (replaced == MAP_FAILED) break;
        // Relaxed: read by this thread's own later look (tripped()), or after the owner's
        // next system call on another; it orders nothing else.
        place.tripped.store(true, std::memory_order_relaxed);
        return;
    }
    // Not a guarded mapping (or no memory to replace it): the default action, which ends
    // the process when the access is retried.
    ::signal(SIGBUS, SIG_DFL);
}

void install_handler() {
    struct sigaction action {};
    action.sa_sigaction = on_bus_error;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    if (::sigaction(SIGBUS, &action, nullptr) != 0) {
        throw SegmentError(std::string("installing the SIGBUS handler failed: ") + std::strerror(errno));
    }
}

}  // namespace

BusErrorGuard::BusErrorGuard(void* base, std::size_t bytes, int protection) {
    std::call_once(handler_installed, install_handler);
    const std::lock_guard lock(places_taken);
    for (int i = 0; i < kMaxGuards; ++i) {
        Place& place = places[i];
        // Relaxed: only this (locked) code takes a place; the handler's reads are ordered
        // by the release store of `begin` below.
        if (place.begin.load(std::memory_order_relaxed) != 0) continue;
        const auto first = reinterpret_cast<std::uintptr_t>(base);
        place.end.store(first + bytes, std::memory_order_relaxed);      // Relaxed: published by `begin`
        place.protection.store(protection, std::memory_order_relaxed);  // Relaxed: likewise
        place.tripped.store(false, std::memory_order_relaxed);          // Relaxed: likewise
        // Release: a handler that sees this `begin` sees the fields above.
        place.begin.store(first, std::memory_order_release);
        place_ = i;
        return;
    }
    throw SegmentError("cannot guard another shared mapping: " + std::to_string(kMaxGuards) +
                       " are guarded already in this process");
}

BusErrorGuard::BusErrorGuard(BusErrorGuard&& other) noexcept : place_(std::exchange(other.place_, -1)) {}

BusErrorGuard& BusErrorGuard::operator=(BusErrorGuard&& other) noexcept {
    if (this != &other) {
        release();
        place_ = std::exchange(other.place_, -1);
    }
    return *this;
}

BusErrorGuard::~BusErrorGuard() { release(); }

void BusErrorGuard::release() noexcept {
    if (place_ < 0) return;
    // Release: the place is free only after everything this guard did with it.
    places[place_].begin.store(0, std::memory_order_release);
    place_ = -1;
}

bool BusErrorGuard::tripped() const noexcept {
    // Relaxed: see the store in the handler.
    return place_ >= 0 && places[place_].tripped.load(std::memory_order_relaxed);
}

void BusErrorGuard::rearm() noexcept {
    // Relaxed: see the store in the handler.
    if (place_ >= 0) places[place_].tripped.store(false, std::memory_order_relaxed);
}

}  // namespace comfy::ipc
