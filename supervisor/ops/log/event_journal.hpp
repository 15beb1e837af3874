#pragma once
// What happened to the machine, as an operator asks "what just happened?": spawns, deaths,
// restarts, failures, admissions with their figures, evictions and releases. The last
// `capacity` events are kept in memory, numbered from 1, so a reader that remembers the
// last number it saw (`comfyctl events --follow`, the dashboard) gets each event once.
// Lives on the supervisor's event loop: no locking.

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
};

// {"seq", "time" (ISO 8601, UTC, milliseconds), "kind", "pack", "text", "figures"}.
nlohmann::json to_json(const JournalEvent& event);

class EventJournal {
public:
    static constexpr std::size_t kDefaultCapacity = 1000;
    explicit EventJournal(std::size_t capacity = kDefaultCapacity) : capacity_(capacity) {}

    // Appends an event (the oldest goes once `capacity` are kept) and tells every listener.
    const JournalEvent& record(std::string kind, std::string pack, std::string text,
                               nlohmann::json figures = nlohmann::json::object());

    // The kept events numbered after `seq`, oldest first, at most `limit` of them (the
    // newest `limit` when more are kept). A reader that fell behind by more than the
    // capacity sees a gap in the numbers.
    std::vector<JournalEvent> since(std::uint64_t seq, std::size_t limit = SIZE_MAX) const;
    std::uint64_t last_seq() const noexcept { return next_seq_ - 1; }

    // Called with each event as it is recorded (a follower's connection); the returned id
    // removes it.
    using Listener = std::function<void(const JournalEvent&)>;
    std::uint64_t listen(Listener listener);
    void unlisten(std::uint64_t id);

private:
    std::size_t capacity_;
    std::deque<JournalEvent> events_;
    std::uint64_t next_seq_ = 1;
    std::vector<std::pair<std::uint64_t, Listener>> listeners_;
    std::uint64_t next_listener_ = 1;
};

}  // namespace comfy::supervisor
