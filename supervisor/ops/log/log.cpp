#include "supervisor/ops/log/log.hpp"

#include "supervisor/ops/log/wall_clock.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace comfy::supervisor {

namespace {

const auto kStart = std::chrono::steady_clock::now();
const bool kToJournal = is_journal_stream(std::getenv("JOURNAL_STREAM"), 2);
// Entries go to the journal's own socket only where it is: sd_journal_send drops an entry
// without a word when it is not (a container given the journal's stream but not its
// socket), and the stream still takes the lines.
const bool kJournalEntries = kToJournal && ::access(kJournalSocket, W_OK) == 0;

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

// One fprintf per line: stdio locks the stream for it, so a line is never cut by another
// thread's.
void write_line(LogLevel level, std::string_view source, std::string_view text, const LogFields& fields) {
    if (kJournalEntries) {
        // The identifier the journal gives a service's stream lines: the program's name.
        const std::string message = std::string(source) + std::string(text);
        if (send_to_journal(journal_fields(syslog_priority(level), message, program_invocation_short_name, fields))) {
            return;
        }
    }
    const auto line = format_log_line(level, source, text, kToJournal, std::chrono::system_clock::now());
    std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace

std::string format_log_line(LogLevel level, std::string_view source, std::string_view text, bool to_journal,
                            std::chrono::system_clock::time_point now) {
    std::string line;
    line.reserve(40 + source.size() + text.size());
    if (to_journal) {
        line += '<';
        line += std::to_string(syslog_priority(level));
        line += '>';
    } else {
        line += utc_timestamp(now);
        line += ' ';
        line += level_word(level);
        line += ' ';
    }
    line += source;
    line += text;
    return line;
}

bool is_journal_stream(const char* journal_stream, int fd) {
    struct stat st {};
    if (journal_stream == nullptr || ::fstat(fd, &st) != 0) return false;
    unsigned long long device = 0;
    unsigned long long inode = 0;
    if (std::sscanf(journal_stream, "%llu:%llu", &device, &inode) != 2) return false;
    return device == st.st_dev && inode == st.st_ino;
}

void log_line(LogLevel level, const std::string& text, const LogFields& fields) {
    const auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - kStart).count();
    char source[48];
    std::snprintf(source, sizeof source, "comfy-supervisor [%8.3f] ", elapsed);
    write_line(level, source, text, fields);
}

void log_child_line(const LogFields& about, std::string_view line) {
    write_line(LogLevel::info, about.pack + ": ", line, about);
}

}  // namespace comfy::supervisor
