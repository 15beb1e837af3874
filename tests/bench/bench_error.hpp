#pragma once
// The benchmark's one exception type. Its message is the single line the user sees, so it
// says what went wrong and what to do about it.

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

namespace comfy::bench {

struct BenchError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Throws "<what> failed: <errno text>; <advice>" for the errno the failed call left.
[[noreturn]] inline void throw_errno(std::string_view what, std::string_view advice) {
    const int error = errno;
    throw BenchError(std::string(what) + " failed: " + std::strerror(error) + "; " + std::string(advice));
}

}  // namespace comfy::bench
