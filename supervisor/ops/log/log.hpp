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
// When stderr is the journal (systemd's JOURNAL_STREAM names it), each line goes to the
// journal as an entry of its own, with the journal's priority instead of the time and level,
// which the journal keeps itself, and what the line is about as fields of its own
// (journal_fields.hpp). Where the journal's socket does not take it, the line goes to stderr
// with the journal's priority prefix.

#include "supervisor/ops/log/journal_fields.hpp"

#include <chrono>
#include <string>
#include <string_view>

namespace comfy::supervisor {

enum class LogLevel { error, warning, info };

// `fields`: what the line is about, for the journal (unused elsewhere).
void log_line(LogLevel level, const std::string& text, const LogFields& fields = {});
inline void log_line(const std::string& text) { log_line(LogLevel::info, text); }
inline void log_warning(const std::string& text) { log_line(LogLevel::warning, text); }
inline void log_error(const std::string& text) { log_line(LogLevel::error, text); }

// One line a child (`about.pack`'s worker, or the ComfyUI host) wrote to its stdout or
// stderr, logged under its pack's name; `about` says which life wrote it, for the journal.
void log_child_line(const LogFields& about, std::string_view line);

// What is written for one line, without its newline: "<6>SOURCE TEXT" for the journal,
// "TIME LEVEL SOURCE TEXT" otherwise.
std::string format_log_line(LogLevel level, std::string_view source, std::string_view text, bool to_journal,
                            std::chrono::system_clock::time_point now);
// Whether `fd` is the stream systemd connected to the journal: `journal_stream` (the
// JOURNAL_STREAM variable, "device:inode") names it; a redirected descriptor no longer
// matches an inherited variable.
bool is_journal_stream(const char* journal_stream, int fd);

}  // namespace comfy::supervisor
