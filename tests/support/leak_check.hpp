#pragma once
// After a test process has run its test cases: anything it leaves behind is a failure.

#include <string>
#include <vector>

namespace comfy::test {

// Live or unreaped child processes of this process, as "pid (comm)".
std::vector<std::string> leftover_children();

// /dev/shm entries of the test instances this process created (see test_instance.hpp).
std::vector<std::string> leftover_segments();

// Kills and reaps leftover children and removes leftover segments, so one failing
// test does not disturb the next; returns what it found, one line each.
std::vector<std::string> collect_and_clean_leaks();

}  // namespace comfy::test
