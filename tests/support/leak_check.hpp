#pragma once
// After a test process has run its test cases: anything it leaves behind is a failure.

#include <string>
#include <vector>

namespace comfy::test {

// Kills and reaps this process's live or unreaped children and removes the /dev/shm
// entries of the test instances it created (see test_instance.hpp), so one failing
// test does not disturb the next; returns what it found, one line each.
std::vector<std::string> collect_and_clean_leaks();

// Before a test process runs anything: /dev/shm entries that already bear this process's
// test prefix were left by an earlier process that had the same pid (one killed at its
// CTest timeout), not by this one; they are removed, said in one line each, so that the
// leak check after the tests sees only what this process left.
void remove_stale_segments();

}  // namespace comfy::test
