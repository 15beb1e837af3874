#include "tests/bench/shared_mapping.hpp"

#include "tests/bench/bench_error.hpp"

#include <sys/mman.h>

namespace comfy::bench {

namespace {
std::byte* map_shared_anonymous(std::size_t bytes) {
    void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) throw_errno("mmap of shared memory", "free some memory and rerun");
    return static_cast<std::byte*>(memory);
}
}  // namespace

SharedMapping::SharedMapping(std::size_t bytes) : data_(map_shared_anonymous(bytes)), size_(bytes) {}

SharedMapping::~SharedMapping() { ::munmap(data_, size_); }

}  // namespace comfy::bench
