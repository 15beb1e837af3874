#pragma once
// A single-writer sequence lock for records in shared memory (census slots, ledger
// entries, participant records). The writer (SeqlockWriter) never waits; a reader retries a bounded
// number of times and then reports `busy`; a torn value is never returned.
//
// The payload is kept as relaxed atomic words rather than plain bytes, so concurrent
// reads and writes are not data races in the C++ memory model (Boehm, "Can seqlocks
// get along with programming language memory models?").

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace comfy::ipc {

enum class SeqlockRead { ok, busy };

template <class T>
class Seqlock {
    static_assert(std::is_trivially_copyable_v<T>, "seqlock payloads are copied as words");
    static constexpr std::size_t kWords = (sizeof(T) + sizeof(std::uint64_t) - 1) / sizeof(std::uint64_t);

public:
    static constexpr int kDefaultTries = 1000;

    // Reader side. Fills `out` only with a value that one write produced whole.
    SeqlockRead read(T& out, int max_tries = kDefaultTries) const noexcept {
        std::uint32_t sequence = 0;
        return read(out, sequence, max_tries);
    }

    // The same, and `sequence` says which write produced `out`: a reader that keeps the
    // value may compare sequence() with it later instead of copying the record again.
    SeqlockRead read(T& out, std::uint32_t& sequence, int max_tries = kDefaultTries) const noexcept {
        std::array<std::uint64_t, kWords> words{};
        for (int attempt = 0; attempt < max_tries; ++attempt) {
            // Acquire: pairs with the writer's final release store.
            const std::uint32_t before = sequence_.load(std::memory_order_acquire);
            if (before & 1u) continue;  // a write is in progress
            for (std::size_t i = 0; i < kWords; ++i) {
                // Relaxed: validated by the sequence re-check below.
                words[i] = words_[i].load(std::memory_order_relaxed);
            }
            // Acquire fence: the payload loads complete before the sequence re-check.
            std::atomic_thread_fence(std::memory_order_acquire);
            // Relaxed: ordered by the fence above.
            if (sequence_.load(std::memory_order_relaxed) == before) {
                std::memcpy(&out, words.data(), sizeof(T));
                sequence = before;
                return SeqlockRead::ok;
            }
        }
        return SeqlockRead::busy;
    }

    // The sequence now: even and equal to what a read() reported means the record is still
    // the value that read returned (a 32-bit count wraps only after 2^31 writes).
    std::uint32_t sequence() const noexcept {
        // Acquire: pairs with the writer's final release store, as in read().
        return sequence_.load(std::memory_order_acquire);
    }

private:
    template <class>
    friend class SeqlockWriter;

    std::atomic<std::uint32_t> sequence_{0};
    std::array<std::atomic<std::uint64_t>, kWords> words_{};
};

// The one writer of a Seqlock. It keeps the sequence privately and never reads it back
// from shared memory: a stray write there (an odd value left by anyone) is overwritten at
// the next write instead of steering every later one. Create it when the record is fresh
// (zero, as a new mapping is) and keep it as long as the record is written.
template <class T>
class SeqlockWriter {
public:
    SeqlockWriter() = default;
    explicit SeqlockWriter(Seqlock<T>& lock) noexcept : lock_(&lock) {}

    void write(const T& value) noexcept {
        std::array<std::uint64_t, Seqlock<T>::kWords> words{};
        std::memcpy(words.data(), &value, sizeof(T));
        // Relaxed store of the odd value, then a release fence: the fence keeps the
        // payload stores below from becoming visible before readers can see "odd".
        lock_->sequence_.store(sequence_ + 1, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_release);
        for (std::size_t i = 0; i < words.size(); ++i) {
            // Relaxed: ordered by the fence above and the release store below.
            lock_->words_[i].store(words[i], std::memory_order_relaxed);
        }
        sequence_ += 2;
        // Release: the payload is complete before the sequence turns even again.
        lock_->sequence_.store(sequence_, std::memory_order_release);
    }

private:
    Seqlock<T>* lock_ = nullptr;
    std::uint32_t sequence_ = 0;  // even; ours alone
};

static_assert(std::atomic<std::uint32_t>::is_always_lock_free && std::atomic<std::uint64_t>::is_always_lock_free,
              "seqlock words must be lock-free to be shared between processes");

}  // namespace comfy::ipc
