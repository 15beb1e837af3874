#include "ipc/process_identity.hpp"

#include <charconv>
#include <fstream>
#include <iterator>
#include <string>

namespace comfy::ipc {

std::optional<std::uint64_t> process_start_time(pid_t pid) {
    if (pid <= 0) return std::nullopt;
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    if (!in) return std::nullopt;
    const std::string stat{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    // The command name (field 2) is in parentheses and may itself hold spaces or ')',
    // so fields are counted from the last ')'.
    const auto close = stat.rfind(')');
    if (close == std::string::npos) return std::nullopt;
    std::size_t pos = close + 1;
    // After ')' comes field 3 (state); the start time is field 22, 19 fields later.
    for (int field = 3; field < 22; ++field) {
        pos = stat.find(' ', pos + 1);
        if (pos == std::string::npos) return std::nullopt;
    }
    const char* begin = stat.data() + pos + 1;
    const char* end = stat.data() + stat.size();
    std::uint64_t ticks = 0;
    const auto [ptr, ec] = std::from_chars(begin, end, ticks);
    if (ec != std::errc{} || ptr == begin) return std::nullopt;
    return ticks;
}

bool process_is_alive(pid_t pid, std::uint64_t start_time) {
    const auto now = process_start_time(pid);
    return now && *now == start_time;
}

}  // namespace comfy::ipc
