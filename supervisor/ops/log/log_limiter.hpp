#pragma once
// Keeps what one participant can make the supervisor log within bounds. A participant
// that repeats something worth a line (a model the ledger will not track, a pin cut short,
// a release nobody asked for) would otherwise write a line per message, thousands a
// second, and bury every other line. Per participant and topic, the first `lines` of a
// window are written; the rest are counted, and when the window ends one line says how
// many were left out. The clock is the caller's: every call takes `now`.

#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace comfy::supervisor {

class LogLimiter {
public:
    using Clock = std::chrono::steady_clock;

    LogLimiter(std::size_t lines, Clock::duration window) : lines_(lines), window_(window) {}

    // The lines to write now for `line`, a line of `topic` about the participant named
    // `who`: the line itself, or nothing when its window already let `lines` through;
    // preceded by the summary of the topic's last window when that one has ended.
    std::vector<std::string> pass(const std::string& who, const std::string& topic, std::string line,
                                  Clock::time_point now);

    // The summaries of the windows that ended by `now` with lines left out, and those
    // windows forgotten: called as time passes, so a summary does not wait for a next line.
    std::vector<std::string> ended(Clock::time_point now);

    // The summaries of every window, ended or not, and all forgotten: at shutdown.
    std::vector<std::string> flush();

private:
    struct Window {
        Clock::time_point end;
        std::size_t written = 0;
        std::size_t suppressed = 0;
    };
    using Key = std::pair<std::string, std::string>;  // who, topic

    // "<who>: 15887 more lines like this suppressed in the last 10 s (<topic>)"
    std::string summary(const Key& key, const Window& window) const;

    std::size_t lines_;
    Clock::duration window_;
    std::map<Key, Window> windows_;
};

}  // namespace comfy::supervisor
