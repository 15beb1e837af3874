#pragma once
// Under a sanitizer build (COMFY_SANITIZE, scripts/test --sanitize): every report from a
// test's processes (the test itself, its forks, the supervisor, the workers, the Python
// host, comfyctl) goes into a folder of that test process's own, and the test fails when
// the folder is not empty at the end, whether or not the process that found it was waited
// for. Without sanitizers every function here does nothing, memory_limit_words aside.

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace comfy::test {

// First thing in main: makes this process's report folder, sends this process's (and its
// forks') reports there, and puts the options naming it into the environment every child
// inherits.
void start_sanitizer_reports();

// The reports written so far, each as its text; the folder is removed.
std::vector<std::string> take_sanitizer_reports();

// `config` with the sanitizer options in the env of each process section (packs and the
// comfyui host): the supervisor passes its own environment to no child. The host, a Python
// interpreter not built with the sanitizer, also gets the sanitizer and C++ runtimes
// preloaded.
nlohmann::json with_sanitizer_environment(nlohmann::json config);

// "NAME=VALUE " words to put after `env` in a shell command that runs Python over
// libcomfy_participant.so: the runtimes preloaded and Python's own leaks not reported.
std::string sanitizer_python_environment();

// Shell words, put before a command, that bound the memory it may take to `mib` MiB:
// `ulimit -v`. ASan and TSan reserve terabytes of address space as they start and abort
// under that limit, so under them it is the runtime's own bound, whose breach is a report:
// ASan's on the resident set (hard_rss_limit_mb); TSan has none that works (it ignores
// that one, and mmap_limit_mb counts its reservations), so it bounds any one allocation
// (max_allocation_size_mb), as a buffer grown without end makes.
std::string memory_limit_words(std::size_t mib);

}  // namespace comfy::test
