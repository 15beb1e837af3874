#pragma once
// Anonymous shared memory (MAP_SHARED | MAP_ANONYMOUS): mapped before fork, so parent and
// child see the same pages without any name in /dev/shm that could be left behind.

#include <cstddef>

namespace comfy::bench {

inline constexpr std::size_t kCacheLine = 64;

constexpr std::size_t round_up_to_cache_line(std::size_t bytes) noexcept {
    return (bytes + kCacheLine - 1) / kCacheLine * kCacheLine;
}

class SharedMapping {
public:
    // Maps `bytes` zeroed, page-aligned bytes; throws BenchError when the kernel refuses.
    explicit SharedMapping(std::size_t bytes);
    ~SharedMapping();
    SharedMapping(const SharedMapping&) = delete;
    SharedMapping& operator=(const SharedMapping&) = delete;

    std::byte* data() const noexcept { return data_; }

private:
    std::byte* data_;
    std::size_t size_;
};

}  // namespace comfy::bench
