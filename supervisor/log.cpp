#include "supervisor/log.hpp"

#include <chrono>
#include <cstdio>

namespace comfy::supervisor {

namespace {
const auto kStart = std::chrono::steady_clock::now();
}

void log_line(const std::string& text) {
    const auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - kStart).count();
    std::fprintf(stderr, "comfy-supervisor [%8.3f] %s\n", elapsed, text.c_str());
}

}  // namespace comfy::supervisor
