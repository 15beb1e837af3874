#pragma once
// Room ops/log/: what happened, as the operator reads it afterwards: the log's lines, their
// limiter and the event journal. The bottom room: every other writes to it, it uses none.
//
// The supervisor's log on stderr, one line per event, for a terminal, a file or the
// systemd journal:
//
//   2026-11-30T21:40:01.234Z info  comfy-supervisor [  12.345] sdxl: ready (pid 1289, generation 1)
//   2026-11-30T21:40:01.240Z info  host: Starting server
//
// wall-clock time (UTC), a level, then the supervisor's own lines with the seconds since it
// started, or a child's output line under its pack's name (supervisor/lifecycle/child_output.hpp).
// When stderr is the journal (systemd's JOURNAL_STREAM names it), each line starts with
// the journal's priority prefix instead of the time, which the journal keeps itself.

#include <chrono>
#include <string>
#include <string_view>

namespace comfy::supervisor {

enum class LogLevel { error, warning, info };

void log_line(LogLevel level, const std::string& text);
inline void log_line(const std::string& text) { log_line(LogLevel::info, text); }
inline void log_warning(const std::string& text) { log_line(LogLevel::warning, text); }
inline void log_error(const std::string& text) { log_line(LogLevel::error, text); }

// One line a child (`pack`'s worker, or the ComfyUI host) wrote to its stdout or stderr.
void log_child_line(std::string_view pack, std::string_view line);

// What is written for one line, without its newline: "<6>SOURCE TEXT" for the journal,
// "TIME LEVEL SOURCE TEXT" otherwise.
std::string format_log_line(LogLevel level, std::string_view source, std::string_view text, bool to_journal,
                            std::chrono::system_clock::time_point now);
// Whether `fd` is the stream systemd connected to the journal: `journal_stream` (the
// JOURNAL_STREAM variable, "device:inode") names it; a redirected descriptor no longer
// matches an inherited variable.
bool is_journal_stream(const char* journal_stream, int fd);

}  // namespace comfy::supervisor
