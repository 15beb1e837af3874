#pragma once
// What happened to the machine, as an operator asks "what just happened?": spawns, deaths,
// restarts, failures, admissions with their figures, evictions and releases. The last
// `capacity` events are kept in memory, numbered from 1, so a reader that remembers the
// last number it saw (`comfyctl events --follow`, the dashboard) gets each event once.
//
// What went wrong (an event at warning or error: a death nobody asked for, a restart, a
// pack given up on, a refused admission, a deaf participant) is kept a second time, apart,
// for its own `failure_capacity`: a demo's prompts make hundreds of routine memory events
// a minute, which would otherwise push a SIGKILL and its restart out of every reader's view.
// Lives on the supervisor's event loop: no locking.

#include "supervisor/ops/log/log.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace comfy::supervisor {

struct JournalEvent {
    std::uint64_t seq = 0;
    std::chrono::system_clock::time_point at;
    std::string kind;  // "spawned", "ready", "exited", "restarting", "failed", "admission", ...
    std::string pack;  // who it is about; empty for the machine as a whole
    std::string text;  // one line, as the log says it
    nlohmann::json figures = nlohmann::json::object();  // the numbers behind the line
    LogLevel level = LogLevel::info;                     // as the log line's
};

// Which events a reader asks for: every one, or those at warning or error alone.
enum class EventFilter { all, failures };

inline bool is_failure(const JournalEvent& event) noexcept { return event.level != LogLevel::info; }

// {"seq", "time" (ISO 8601, UTC, milliseconds), "level" ("info", "warning", "error"), "kind",
// "pack", "text", "figures"}.
nlohmann::json to_json(const JournalEvent& event);

class EventJournal {
public:
    static constexpr std::size_t kDefaultCapacity = 1000;
    static constexpr std::size_t kDefaultFailureCapacity = 1000;
    explicit EventJournal(std::size_t capacity = kDefaultCapacity,
                          std::size_t failure_capacity = kDefaultFailureCapacity)
        : capacity_(capacity), failure_capacity_(failure_capacity) {}

    // Appends an event (the oldest goes once `capacity` are kept; a failure is kept apart
    // too) and tells every listener.
    const JournalEvent& record(std::string kind, std::string pack, std::string text,
                               nlohmann::json figures = nlohmann::json::object(), LogLevel level = LogLevel::info);

    // The kept events numbered after `seq`, oldest first, at most `limit` of them (the
    // newest `limit` when more are kept); with EventFilter::failures, the failures kept
    // apart. A reader that fell behind by more than the capacity sees a gap in the numbers
    // (failures alone are never consecutive).
    std::vector<JournalEvent> since(std::uint64_t seq, std::size_t limit = SIZE_MAX,
                                    EventFilter filter = EventFilter::all) const;
    std::uint64_t last_seq() const noexcept { return next_seq_ - 1; }

    // Called with each event as it is recorded (a follower's connection); the returned id
    // removes it.
    using Listener = std::function<void(const JournalEvent&)>;
    std::uint64_t listen(Listener listener);
    void unlisten(std::uint64_t id);

private:
    std::size_t capacity_;
    std::size_t failure_capacity_;
    std::deque<JournalEvent> events_;
    std::deque<JournalEvent> failures_;  // copies of the warnings and errors, kept longer
    std::uint64_t next_seq_ = 1;
    std::vector<std::pair<std::uint64_t, Listener>> listeners_;
    std::uint64_t next_listener_ = 1;
};

}  // namespace comfy::supervisor
