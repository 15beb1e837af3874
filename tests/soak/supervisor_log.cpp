#include "tests/soak/supervisor_log.hpp"

#include <cstdio>
#include <cstdlib>

namespace comfy::soak {

namespace {

constexpr std::string_view kPrefix = "comfy-supervisor [";
// Where the tag starts at the latest: after "2026-11-30T21:40:01.234Z error ".
constexpr std::size_t kTagAtMost = 31;

bool starts_with(const std::string& text, std::string_view prefix) { return text.rfind(prefix, 0) == 0; }

// The whole number at `at` in `text`, and where it ends; nothing when there is none.
std::optional<std::uint64_t> number_at(const std::string& text, std::size_t& at) {
    const std::size_t start = at;
    std::uint64_t value = 0;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') value = value * 10 + static_cast<unsigned>(text[at++] - '0');
    if (at == start) return std::nullopt;
    return value;
}

// The number right after the first `marker` at or after `from`.
std::optional<std::uint64_t> number_after(const std::string& text, std::string_view marker, std::size_t& from) {
    const auto found = text.find(marker, from);
    if (found == std::string::npos) return std::nullopt;
    from = found + marker.size();
    return number_at(text, from);
}

// "NAME (slot N" at or after `at` (a pack's name has no space): N, and `at` after it.
std::optional<std::uint64_t> named_slot(const std::string& text, std::size_t& at) {
    return number_after(text, " (slot ", at);
}

}  // namespace

std::optional<LogLine> parse_log_line(const std::string& raw) {
    // After the time and the level, which a child's line has too.
    const auto tag = raw.find(kPrefix);
    if (tag == std::string::npos || tag > kTagAtMost) return std::nullopt;
    const auto open = tag + kPrefix.size();
    const auto close = raw.find("] ", open);
    if (close == std::string::npos) return std::nullopt;
    char* end = nullptr;
    const std::string seconds = raw.substr(open, close - open);
    const double value = std::strtod(seconds.c_str(), &end);
    if (end == seconds.c_str()) return std::nullopt;
    return LogLine{value, raw.substr(close + 2)};
}

std::optional<std::string> parse_child_line(const std::string& raw) {
    if (parse_log_line(raw)) return std::nullopt;
    const auto time_end = raw.find(' ');
    const auto level = raw.find_first_not_of(' ', time_end);
    const auto level_end = raw.find(' ', level);
    const auto text = raw.find_first_not_of(' ', level_end);
    if (time_end == std::string::npos || level == std::string::npos || level_end == std::string::npos ||
        text == std::string::npos) {
        return std::nullopt;
    }
    return raw.substr(text);
}

std::optional<Death> parse_death(const std::string& text) {
    const auto colon = text.find(": ");
    if (colon == std::string::npos || colon == 0) return std::nullopt;
    std::size_t at = colon + 2;
    for (const std::string_view marker : {"worker pid ", "pid "}) {
        if (text.compare(at, marker.size(), marker) == 0) {
            at += marker.size();
            break;
        }
    }
    const auto pid = number_at(text, at);
    if (!pid || text.compare(at, 13, " (generation ") != 0) return std::nullopt;
    at += 13;
    const auto generation = number_at(text, at);
    if (!generation || text.compare(at, 2, ") ") != 0) return std::nullopt;
    const std::string how = text.substr(at + 2);
    if (!starts_with(how, "killed by SIG") && !starts_with(how, "exited with status")) return std::nullopt;
    return Death{text.substr(0, colon), static_cast<pid_t>(*pid), static_cast<std::uint32_t>(*generation), how};
}

bool is_timing_verdict(const std::string& how) {
    for (const std::string_view verdict : {"(hung: no heartbeat", "(no Hello within", "unreadable at two heartbeat checks"}) {
        if (how.find(verdict) != std::string::npos) return true;
    }
    return false;
}

std::optional<EvictionAsk> parse_eviction_ask(const std::string& text) {
    if (!starts_with(text, "memory: ")) return std::nullopt;
    std::size_t at = 8;
    const auto asker = named_slot(text, at);
    if (!asker || text.compare(at, 8, ") needs ") != 0) return std::nullopt;
    const auto asking = text.find(": asking ", at);
    if (asking == std::string::npos) return std::nullopt;
    at = asking + 9;
    const auto owner = named_slot(text, at);
    if (!owner || text.compare(at, 13, ", generation ") != 0) return std::nullopt;
    at += 13;
    const auto generation = number_at(text, at);
    if (!generation) return std::nullopt;
    return EvictionAsk{static_cast<std::uint32_t>(*asker), static_cast<std::uint32_t>(*owner),
                       static_cast<std::uint32_t>(*generation)};
}

std::optional<PromptFailure> parse_prompt_failure(const std::string& text) {
    if (!starts_with(text, "prompt ")) return std::nullopt;
    std::size_t at = 7;
    const auto prompt = number_at(text, at);
    if (!prompt || text.compare(at, 7, ": node ") != 0) return std::nullopt;
    for (const std::string_view ending : {" failed in its worker", " could not run: "}) {
        const auto found = text.find(ending, at);
        if (found != std::string::npos) {
            const std::string why = ending.back() == ' ' ? text.substr(found + ending.size()) : "failed in its worker";
            return PromptFailure{static_cast<std::uint32_t>(*prompt), why};
        }
    }
    return std::nullopt;
}

bool is_shutdown_start(const std::string& text) { return starts_with(text, "shutting down ("); }

bool is_stale_segment_removed(const std::string& text) { return starts_with(text, "removing stale segment "); }

std::optional<AnswerTimeout> parse_answer_timeout(const std::string& text) {
    std::size_t at = 0;
    if (starts_with(text, "memory: owner ") && text.find(") did not answer within ") != std::string::npos) {
        at = 14;
    } else if (starts_with(text, "memory: sibling ") &&
               text.find(") did not answer the partial release within ") != std::string::npos) {
        at = 16;
    } else {
        return std::nullopt;
    }
    const auto slot = named_slot(text, at);
    const auto generation = slot && text.compare(at, 13, ", generation ") == 0 ? number_after(text, ", generation ", at)
                                                                                : std::nullopt;
    if (!generation) return std::nullopt;
    return AnswerTimeout{static_cast<std::uint32_t>(*slot), static_cast<std::uint32_t>(*generation)};
}

std::optional<std::string> parse_found_deaf(const std::string& text) {
    const auto colon = text.find(": deaf: it let a command go unanswered");
    if (colon == std::string::npos || colon == 0) return std::nullopt;
    return text.substr(0, colon);
}

std::optional<Escaped> parse_escaped(const std::string& text, const std::string& name) {
    constexpr std::string_view kSaid = "misbehaving-worker: escaped: setsid child ";
    if (!starts_with(text, name + ": ") || text.compare(name.size() + 2, kSaid.size(), kSaid) != 0) return std::nullopt;
    std::size_t at = name.size() + 2 + kSaid.size();
    const auto child = number_at(text, at);
    if (!child || text.compare(at, 9, ", daemon ") != 0) return std::nullopt;
    at += 9;
    const auto daemon = number_at(text, at);
    if (!daemon) return std::nullopt;
    return Escaped{static_cast<pid_t>(*child), static_cast<pid_t>(*daemon)};
}

bool says_outcome(const std::string& text, const std::string& name, pid_t pid, const std::string& outcome) {
    if (!starts_with(text, name + ": ") || text.find(outcome) == std::string::npos) return false;
    std::size_t at = name.size() + 2;
    const auto said = number_after(text, "pid ", at);
    return said && *said == static_cast<std::uint64_t>(pid);
}

}  // namespace comfy::soak
