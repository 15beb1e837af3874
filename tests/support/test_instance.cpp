#include "tests/support/test_instance.hpp"

#include <unistd.h>

#include <atomic>

namespace comfy::test {

namespace {
// The pid of the test process itself, fixed before any fork so children name alike.
const pid_t kTestPid = ::getpid();
std::atomic<unsigned> next_id{0};
}  // namespace

std::string test_instance(std::string_view tag) {
    // Relaxed: only uniqueness matters, not ordering with other memory.
    const unsigned id = next_id.fetch_add(1, std::memory_order_relaxed);
    // Appended piece by piece: GCC 12 at -O3 warns falsely (-Wrestrict) on "t" + string.
    std::string name = "t";
    name += std::to_string(kTestPid);
    name += '-';
    name += tag;
    name += '-';
    name += std::to_string(id);
    return name;
}

std::string test_segment_prefix() {
    return "comfy-sv-" + std::to_string(::geteuid()) + "-t" + std::to_string(kTestPid) + "-";
}

}  // namespace comfy::test
