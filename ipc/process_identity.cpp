#include "ipc/process_identity.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <string>

namespace comfy::ipc {

std::optional<std::string> read_proc_stat(pid_t pid) {
    if (pid <= 0) return std::nullopt;
    // Plain read(2): the process may exit while we read, which must mean "gone", not
    // an exception from a stream.
    const int fd = ::open(("/proc/" + std::to_string(pid) + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    char buffer[1024];
    const ssize_t length = ::read(fd, buffer, sizeof buffer);
    ::close(fd);
    if (length <= 0) return std::nullopt;
    return std::string(buffer, static_cast<std::size_t>(length));
}

std::optional<std::uint64_t> process_start_time(pid_t pid) {
    const auto read = read_proc_stat(pid);
    if (!read) return std::nullopt;
    const std::string& stat = *read;
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

std::optional<pid_t> parent_in_stat(const std::string& stat) {
    // After the last ')' of the command name: " STATE PPID ...".
    const auto close = stat.rfind(')');
    if (close == std::string::npos || close + 4 >= stat.size()) return std::nullopt;
    const char* begin = stat.data() + close + 4;
    pid_t parent = 0;
    const auto [ptr, ec] = std::from_chars(begin, stat.data() + stat.size(), parent);
    if (ec != std::errc{} || ptr == begin) return std::nullopt;
    return parent;
}

std::optional<pid_t> parent_pid(pid_t pid) {
    const auto read = read_proc_stat(pid);
    return read ? parent_in_stat(*read) : std::nullopt;
}

bool process_is_alive(pid_t pid, std::uint64_t start_time) {
    const auto now = process_start_time(pid);
    return now && *now == start_time;
}

}  // namespace comfy::ipc
