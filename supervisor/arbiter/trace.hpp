#pragma once
// Arbiter traces: every event the arbiter handled, with the snapshot it was handled
// against and the decisions it returned, as JSON Lines (docs/TRACE.md). Because the
// arbiter is a pure function of its config, its events and their snapshots, a trace
// replays to the same decisions; replay checks that it does.

#include "supervisor/arbiter/arbiter_io.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <iosfwd>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace comfy::arbiter {

// A trace that cannot be read or written. The message is one line; for a malformed
// trace it is "line N: at <JSON path>: expected <what>, found <what was there>".
class TraceError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

inline constexpr std::uint32_t kTraceVersion = 2;

// What replay reads: a trace file of at most 1 GiB (some hours of a busy machine), and
// lines of at most 32 MiB each (the longest a recorder writes is an admission keeping a
// full ledger, 1,048,576 ids of up to 20 digits: about 22 MiB). Both keep what a wrong
// file can make replay allocate within a few GiB.
inline constexpr std::uint64_t kMaxTraceFileBytes = std::uint64_t{1} << 30;
inline constexpr std::uint64_t kMaxTraceLineBytes = std::uint64_t{32} << 20;

// Trace lines keep their keys in the order written, so that a line reads kind first and
// snapshot last. Compare two lines only when both come from to_json (same key order).
using TraceJson = nlohmann::ordered_json;

// replay()'s results, which are also `comfy-supervisor replay`'s exit statuses.
inline constexpr int kReplayAgreed = 0;
inline constexpr int kReplayDiffered = 1;
inline constexpr int kTraceMalformed = 2;

struct TraceHeader {
    ArbiterConfig config;
    std::uint32_t ledger_capacity = 0;
};

// One event line: the event and the world it was handled against.
struct TraceEntry {
    Event event;
    Snapshot snapshot;
};

TraceJson header_json(const ArbiterConfig& config, std::uint32_t ledger_capacity);
TraceJson to_json(const Event& event, const Snapshot& snapshot);
TraceJson to_json(const Action& action);

// The parsers take the line's number (the header is line 1) for their messages, and
// throw TraceError.
TraceHeader parse_header(const TraceJson& line, std::size_t line_number);
TraceEntry parse_event_line(const TraceJson& line, std::size_t line_number);
Action parse_decision_line(const TraceJson& line, std::size_t line_number);

// Writes a trace as the arbiter runs. Each line is flushed as it is written, so a crash
// loses at most the line being written. Throws TraceError when the file cannot be
// opened or written.
class TraceRecorder {
public:
    TraceRecorder(const std::string& path, const ArbiterConfig& config, std::uint32_t ledger_capacity);

    // One handled event: its line, then one line per action, in order.
    void record(const Event& event, const Snapshot& snapshot, const std::vector<Action>& actions);

private:
    struct CloseFile {
        void operator()(std::FILE* file) const { std::fclose(file); }
    };

    void write_line(const TraceJson& line);

    std::string path_;
    std::unique_ptr<std::FILE, CloseFile> file_;
};

// Replays `trace` through a fresh arbiter, writing each replayed decision to `decisions`
// as a decision line. When the trace holds recorded decisions, the replayed ones must
// equal them, event by event; the first difference is written to `errors` as
// "line N: recorded ... but replay decided ...". Returns 0 when replay agrees (or there
// was nothing to compare), 1 on a difference, 2 on a malformed trace (its one-line
// message on `errors`).
int replay(std::istream& trace, std::ostream& decisions, std::ostream& errors);

// `comfy-supervisor replay TRACE`: replay() of the file with std::cout and std::cerr,
// each message on std::cerr starting with the file's name; 2 with a one-line message when
// the file cannot be read (not a regular file, larger than kMaxTraceFileBytes).
int run_replay_command(const std::string& path);

}  // namespace comfy::arbiter
