#include "supervisor/log.hpp"

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace comfy::supervisor {

namespace {

const auto kStart = std::chrono::steady_clock::now();

// Whether stderr is the stream systemd connected to the journal: JOURNAL_STREAM holds its
// "device:inode", which an inherited variable with a redirected stderr no longer matches.
bool stderr_is_journal() {
    const char* stream = std::getenv("JOURNAL_STREAM");
    struct stat st {};
    if (stream == nullptr || ::fstat(2, &st) != 0) return false;
    unsigned long long device = 0;
    unsigned long long inode = 0;
    if (std::sscanf(stream, "%llu:%llu", &device, &inode) != 2) return false;
    return device == st.st_dev && inode == st.st_ino;
}

const bool kToJournal = stderr_is_journal();

// The journal's priorities (sd-daemon(3)): err, warning, info.
int syslog_priority(LogLevel level) {
    switch (level) {
        case LogLevel::error: return 3;
        case LogLevel::warning: return 4;
        case LogLevel::info: break;
    }
    return 6;
}

const char* level_word(LogLevel level) {
    switch (level) {
        case LogLevel::error: return "error";
        case LogLevel::warning: return "warn ";
        case LogLevel::info: break;
    }
    return "info ";
}

// "2026-11-30T21:40:01.234Z": UTC, so that lines from machines in other zones sort together.
void format_now(char (&text)[32]) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
    const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
    std::tm utc{};
    ::gmtime_r(&seconds, &utc);
    const std::size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
    std::snprintf(text + n, sizeof text - n, ".%03dZ", static_cast<int>(ms % 1000));
}

// One fprintf per line: stdio locks the stream for it, so a line is never cut by another
// thread's.
void write_line(LogLevel level, std::string_view source, std::string_view text) {
    const int source_length = static_cast<int>(source.size());
    const int text_length = static_cast<int>(text.size());
    if (kToJournal) {
        std::fprintf(stderr, "<%d>%.*s%.*s\n", syslog_priority(level), source_length, source.data(), text_length,
                     text.data());
        return;
    }
    char now[32];
    format_now(now);
    std::fprintf(stderr, "%s %s %.*s%.*s\n", now, level_word(level), source_length, source.data(), text_length,
                 text.data());
}

}  // namespace

void log_line(LogLevel level, const std::string& text) {
    const auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - kStart).count();
    char source[48];
    std::snprintf(source, sizeof source, "comfy-supervisor [%8.3f] ", elapsed);
    write_line(level, source, text);
}

void log_child_line(std::string_view pack, std::string_view line) {
    const std::string source = std::string(pack) + ": ";
    write_line(LogLevel::info, source, line);
}

}  // namespace comfy::supervisor
