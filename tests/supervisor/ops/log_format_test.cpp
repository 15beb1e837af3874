// The log's lines: wall-clock time in UTC and a level for a terminal or a file, the
// journal's priority prefix instead when stderr is the journal.
#include <catch2/catch.hpp>

#include "supervisor/ops/log/log.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <string>

using namespace comfy::supervisor;

TEST_CASE("a log line has the UTC time and its level, or the journal's priority when stderr is the journal") {
    // 2026-11-30T21:40:01.234Z
    const std::chrono::system_clock::time_point at{std::chrono::milliseconds(1796074801234LL)};
    CHECK(format_log_line(LogLevel::info, "comfy-supervisor [   1.000] ", "sdxl: ready", false, at) ==
          "2026-11-30T21:40:01.234Z info  comfy-supervisor [   1.000] sdxl: ready");
    CHECK(format_log_line(LogLevel::warning, "host: ", "x", false, at) == "2026-11-30T21:40:01.234Z warn  host: x");
    CHECK(format_log_line(LogLevel::error, "", "y", false, at) == "2026-11-30T21:40:01.234Z error y");
    CHECK(format_log_line(LogLevel::info, "host: ", "x", true, at) == "<6>host: x");
    CHECK(format_log_line(LogLevel::warning, "", "x", true, at) == "<4>x");
    CHECK(format_log_line(LogLevel::error, "", "x", true, at) == "<3>x");
}

TEST_CASE("the journal is recognised by its device and inode only") {
    int ends[2];
    REQUIRE(::pipe(ends) == 0);
    struct stat st {};
    REQUIRE(::fstat(ends[1], &st) == 0);
    const std::string mine = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
    CHECK(is_journal_stream(mine.c_str(), ends[1]));
    CHECK_FALSE(is_journal_stream(nullptr, ends[1]));
    CHECK_FALSE(is_journal_stream("", ends[1]));
    CHECK_FALSE(is_journal_stream((std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino + 1)).c_str(), ends[1]));
    CHECK_FALSE(is_journal_stream(mine.c_str(), -1));
    ::close(ends[0]);
    ::close(ends[1]);
}
