#include "supervisor/ops/log/event_journal.hpp"

#include "supervisor/ops/log/wall_clock.hpp"

#include <algorithm>

namespace comfy::supervisor {

namespace {

const char* level_name(LogLevel level) {
    switch (level) {
        case LogLevel::error: return "error";
        case LogLevel::warning: return "warning";
        case LogLevel::info: break;
    }
    return "info";
}

// The newest `limit` of the events from `first` to `end`.
template <class Iterator>
std::vector<JournalEvent> newest(Iterator first, Iterator end, std::size_t limit) {
    const auto available = static_cast<std::size_t>(end - first);
    if (available > limit) first = end - static_cast<std::ptrdiff_t>(limit);
    return {first, end};
}

}  // namespace

nlohmann::json to_json(const JournalEvent& event) {
    return {{"seq", event.seq},   {"time", utc_timestamp(event.at)}, {"level", level_name(event.level)},
            {"kind", event.kind}, {"pack", event.pack},              {"text", event.text},
            {"figures", event.figures}};
}

const JournalEvent& EventJournal::record(std::string kind, std::string pack, std::string text,
                                         nlohmann::json figures, LogLevel level) {
    if (events_.size() == capacity_) events_.pop_front();
    events_.push_back(JournalEvent{next_seq_++, std::chrono::system_clock::now(), std::move(kind), std::move(pack),
                                   std::move(text), std::move(figures), level});
    if (is_failure(events_.back()) && failure_capacity_ > 0) {
        if (failures_.size() == failure_capacity_) failures_.pop_front();
        failures_.push_back(events_.back());
    }
    // A copy: a listener may unlisten (itself or another) while it is told.
    const auto listeners = listeners_;
    for (const auto& [id, listener] : listeners) listener(events_.back());
    return events_.back();
}

std::vector<JournalEvent> EventJournal::since(std::uint64_t seq, std::size_t limit, EventFilter filter) const {
    if (filter == EventFilter::failures) {
        const auto after = [](std::uint64_t seen, const JournalEvent& event) { return seen < event.seq; };
        const auto first = std::upper_bound(failures_.begin(), failures_.end(), seq, after);
        return newest(first, failures_.end(), limit);
    }
    // Numbers are consecutive in the deque: the first one after `seq` is found by arithmetic.
    auto first = events_.begin();
    if (!events_.empty() && seq >= events_.front().seq) {
        first += static_cast<std::ptrdiff_t>(std::min<std::uint64_t>(seq - events_.front().seq + 1, events_.size()));
    }
    return newest(first, events_.end(), limit);
}

std::uint64_t EventJournal::listen(Listener listener) {
    listeners_.emplace_back(next_listener_, std::move(listener));
    return next_listener_++;
}

void EventJournal::unlisten(std::uint64_t id) {
    std::erase_if(listeners_, [id](const auto& entry) { return entry.first == id; });
}

}  // namespace comfy::supervisor
