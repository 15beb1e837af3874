#pragma once
// What every fuzz target checks beyond "no crash, no sanitizer report": a refused input is
// refused with one line. A broken promise aborts, which libFuzzer reports as a crash.

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace comfy::fuzz {

[[noreturn]] inline void broken(const char* promise, std::string_view detail) {
    std::fprintf(stderr, "fuzz check failed: %s: %.*s\n", promise, static_cast<int>(detail.size()), detail.data());
    std::abort();
}

// One line, no newline in it, starting with `prefix`.
inline void check_one_line(std::string_view message, std::string_view prefix) {
    if (message.empty() || message.find('\n') != std::string_view::npos) broken("a message of one line", message);
    if (!message.starts_with(prefix)) broken("a message naming its file", message);
}

}  // namespace comfy::fuzz
