#pragma once
// Reads the lines of the supervisor's log that the soak acts on or checks. The log is
// "TIME LEVEL comfy-supervisor [SECONDS] TEXT" per line, SECONDS since the supervisor
// started; the workers' own output lines ("TIME LEVEL PACK: LINE") are not the supervisor's.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace comfy::soak {

struct LogLine {
    double seconds;
    std::string text;
};
std::optional<LogLine> parse_log_line(const std::string& raw);
// A participant's own output line, as the supervisor logs it ("TIME LEVEL NAME: LINE"):
// its "NAME: LINE"; nothing for a line of the supervisor's own.
std::optional<std::string> parse_child_line(const std::string& raw);

// "NAME: worker pid P (generation G) HOW" (or "host: pid P ..."): a participant died.
struct Death {
    std::string name;
    pid_t pid;
    std::uint32_t generation;
    std::string how;  // "killed by SIGKILL", "exited with status 0", with "(why)" when stopped
};
std::optional<Death> parse_death(const std::string& text);

// Whether a death's HOW is a verdict of time (no heartbeat, no Hello, a census mid-write
// at two checks): one a stalled machine can bring about.
bool is_timing_verdict(const std::string& how);

// "memory: P (slot A) needs ...: asking Q (slot B, generation G) to ...": an eviction asked
// of B for A's admission (P and Q their packs' names).
struct EvictionAsk {
    std::uint32_t asker_slot;
    std::uint32_t owner_slot;
    std::uint32_t owner_generation;
};
std::optional<EvictionAsk> parse_eviction_ask(const std::string& text);

// "NAME: misbehaving-worker: escaped: setsid child P, daemon Q": the processes the escape
// mode of NAME's worker started outside its process group.
struct Escaped {
    pid_t setsid_child;
    pid_t daemon;
};
std::optional<Escaped> parse_escaped(const std::string& text, const std::string& name);

// "prompt N: node X failed in its worker" or "prompt N: node X could not run: WHY".
struct PromptFailure {
    std::uint32_t prompt;
    std::string why;
};
std::optional<PromptFailure> parse_prompt_failure(const std::string& text);

// "shutting down (WHY): ...": from here on deaths and failed prompts are the shutdown's.
bool is_shutdown_start(const std::string& text);
// "removing stale segment NAME: ...": a new supervisor found its dead predecessor's.
bool is_stale_segment_removed(const std::string& text);
// "memory: owner P (slot S, generation G) did not answer within ..." or "memory: sibling P
// (slot S, generation G) did not answer the partial release within ...": a load waited one
// answer time-out on S, which is deaf from then on.
struct AnswerTimeout {
    std::uint32_t slot;
    std::uint32_t generation;
};
std::optional<AnswerTimeout> parse_answer_timeout(const std::string& text);
// "NAME: deaf: ...": the participant NAME was found deaf; its name.
std::optional<std::string> parse_found_deaf(const std::string& text);
// Whether `text` says `name` (with `pid`) came to `outcome`, as a hostile pack's must.
bool says_outcome(const std::string& text, const std::string& name, pid_t pid, const std::string& outcome);

}  // namespace comfy::soak
