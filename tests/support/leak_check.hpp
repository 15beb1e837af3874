#pragma once
// After a test process has run its test cases: anything it leaves behind is a failure.

#include <string>
#include <vector>

namespace comfy::test {

// Kills and reaps this process's live or unreaped children and removes the /dev/shm
// entries of the test instances it created (see test_instance.hpp), so one failing
// test does not disturb the next; returns what it found, one line each.
std::vector<std::string> collect_and_clean_leaks();

}  // namespace comfy::test
