#pragma once
// An anonymous shared mapping: memory that a forked child shares with its parent, for
// tests of shared-memory structures without a named segment.

#include <sys/mman.h>

#include <cstddef>
#include <new>

namespace comfy::test {

class SharedBlock {
public:
    explicit SharedBlock(std::size_t bytes) : bytes_(bytes) {
        memory_ = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (memory_ == MAP_FAILED) throw std::bad_alloc();
    }
    ~SharedBlock() { ::munmap(memory_, bytes_); }
    SharedBlock(const SharedBlock&) = delete;
    SharedBlock& operator=(const SharedBlock&) = delete;

    void* get() const noexcept { return memory_; }

private:
    std::size_t bytes_;
    void* memory_;
};

}  // namespace comfy::test
