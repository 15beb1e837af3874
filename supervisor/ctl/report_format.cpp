#include "supervisor/ctl/report_format.hpp"

#include <chrono>
#include <cstring>

namespace comfy::ctl {

std::string age_text(std::uint64_t started_at_ms, std::uint64_t now_ms) {
    if (started_at_ms == 0) return "-";
    const std::uint64_t seconds = now_ms > started_at_ms ? (now_ms - started_at_ms) / 1000 : 0;
    if (seconds < 60) return std::to_string(seconds) + "s";
    if (seconds < 60 * 60) return std::to_string(seconds / 60) + "m";
    if (seconds < 24 * 60 * 60) return std::to_string(seconds / (60 * 60)) + "h";
    return std::to_string(seconds / (24 * 60 * 60)) + "d";
}

std::string exit_text(std::int32_t last_exit_status, std::int32_t last_exit_signal) {
    if (last_exit_signal != 0) {
        std::string text = "signal " + std::to_string(last_exit_signal);
        if (const char* abbrev = ::sigabbrev_np(last_exit_signal)) text += std::string(" (SIG") + abbrev + ")";
        return text;
    }
    if (last_exit_status == -1) return "-";
    return "exit " + std::to_string(last_exit_status);
}

std::uint64_t wall_clock_ms() {
    const auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count());
}

}  // namespace comfy::ctl
