#pragma once
// Instance names for tests: unique per test process and call, and recognisable, so the
// leak check can find exactly the segments this process made.

#include <string>
#include <string_view>

namespace comfy::test {

// e.g. "t12345-ring-3": a valid --instance name unique within this process.
std::string test_instance(std::string_view tag);

// The /dev/shm file-name prefix of every segment made for this process's instances.
std::string test_segment_prefix();

}  // namespace comfy::test
