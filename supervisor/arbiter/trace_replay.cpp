// Replay: a trace's events fed through a fresh arbiter, and what it decides compared with
// the decisions recorded after each event (replay); `comfy-supervisor replay TRACE`
// (run_replay_command) runs it on a file.
#include "supervisor/arbiter/trace.hpp"

#include "shared/byte_size.hpp"
#include "shared/input_file.hpp"
#include "shared/json_errors.hpp"
#include "supervisor/arbiter/arbiter.hpp"
#include "supervisor/arbiter/trace_format.hpp"

#include <array>
#include <cstddef>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace comfy::arbiter {

namespace {

// A line in a message about a difference: whole, unless longer than anyone reads (a note's
// text may be megabytes). Cut on a character boundary, so the message stays UTF-8.
std::string shown_line(const TraceJson& line) {
    constexpr std::size_t kMaxShown = 1000;
    std::string text = line_text(line);
    if (text.size() <= kMaxShown) return text;
    text.resize(kMaxShown - 3);
    while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xc0) == 0x80) text.pop_back();
    if (!text.empty() && static_cast<unsigned char>(text.back()) >= 0xc0) text.pop_back();  // a cut lead byte
    return text + "...";
}

TraceJson parse_line(const std::string& text, std::size_t line_number) {
    try {
        return parse_json<TraceJson>(text);
    } catch (const JsonTextError& error) {
        if (error.syntax()) {
            throw TraceError(line_label(line_number) + ": not valid JSON (at character " +
                             std::to_string(error.byte()) + ")");
        }
        throw TraceError(line_label(line_number) + ": at character " + std::to_string(error.byte()) + ": " +
                         error.detail());
    }
}

// std::getline, but a line is never let grow past kMaxTraceLineBytes, and a failed read
// (an I/O error) is told from the trace's end.
bool next_line(std::istream& trace, std::string& text, std::size_t line_number) {
    text.clear();
    std::array<char, 65536> chunk;
    for (;;) {
        trace.getline(chunk.data(), static_cast<std::streamsize>(chunk.size()));
        const auto count = static_cast<std::size_t>(trace.gcount());
        if (trace.bad()) throw TraceError(line_label(line_number) + ": cannot read the trace");
        const bool ended = trace.eof();
        const bool chunk_full = trace.fail() && !ended;  // no newline yet: the line goes on
        text.append(chunk.data(), ended || chunk_full ? count : count - 1);  // count includes the newline
        if (text.size() > kMaxTraceLineBytes) {
            throw TraceError(line_label(line_number) + ": expected a line of at most " +
                             format_byte_size_exact(kMaxTraceLineBytes) + ", found a longer one");
        }
        if (ended) return !text.empty();
        if (!chunk_full) return true;
        trace.clear();
    }
}

std::string decisions_counted(std::size_t count) {
    return std::to_string(count) + (count == 1 ? " decision" : " decisions");
}

// Feeds event lines to an arbiter and compares what it decides with the decision lines
// recorded after each event.
class Replayer {
public:
    Replayer(const TraceHeader& header, std::ostream& decisions)
        : arbiter_(header.config, header.ledger_capacity), decisions_(decisions) {}

    void feed(const TraceJson& line, std::size_t line_number) {
        if (line.contains("event")) {
            on_event(line, line_number);
        } else if (line.contains("decision")) {
            on_decision(line, line_number);
        } else {
            throw TraceError(json_error_message(line_label(line_number), "", "an event line or a decision line",
                                                describe_json_value(line)));
        }
    }

    // The end of the trace: the last event's decisions are all in.
    void finish() { close_event(); }

    // The first difference, once the trace is known to hold recorded decisions: a trace
    // of events alone has nothing to compare against.
    std::optional<std::string> mismatch() const {
        return trace_has_decisions_ ? first_difference_ : std::nullopt;
    }

private:
    void on_event(const TraceJson& line, std::size_t line_number) {
        close_event();
        const TraceEntry entry = parse_event_line(line, line_number);
        replayed_.clear();
        for (const Action& action : arbiter_.handle(entry.event, entry.snapshot)) {
            replayed_.push_back(to_json(action));
            decisions_ << line_text(replayed_.back()) << '\n';
        }
        event_line_ = line_number;
        recorded_ = 0;
    }

    void on_decision(const TraceJson& line, std::size_t line_number) {
        if (event_line_ == 0) {
            throw TraceError(json_error_message(line_label(line_number), "/decision",
                                                "an event line before the first decision line", "a decision line"));
        }
        // Written back from its parsed form, the recorded decision has the same key
        // order as the replayed one, and hand-written byte sizes become numbers.
        const TraceJson recorded = to_json(parse_decision_line(line, line_number));
        trace_has_decisions_ = true;
        if (recorded_ >= replayed_.size()) {
            found_difference(line_label(line_number) + ": recorded " + shown_line(recorded) +
                             " but replay decided nothing more for the event on line " + std::to_string(event_line_));
        } else if (recorded != replayed_[recorded_]) {
            found_difference(line_label(line_number) + ": recorded " + shown_line(recorded) + " but replay decided " +
                             shown_line(replayed_[recorded_]));
        }
        ++recorded_;
    }

    void close_event() {
        if (recorded_ >= replayed_.size()) return;
        found_difference(line_label(event_line_) + ": recorded " + decisions_counted(recorded_) +
                         " for this event but replay decided " + std::to_string(replayed_.size()) +
                         ", the first extra being " + shown_line(replayed_[recorded_]));
    }

    // Only the first counts: after it the replayed world has parted from the recorded one.
    void found_difference(std::string message) {
        if (!first_difference_) first_difference_ = std::move(message);
    }

    Arbiter arbiter_;
    std::ostream& decisions_;
    std::size_t event_line_ = 0;  // the event whose decisions are being compared; 0 before the first
    std::vector<TraceJson> replayed_;
    std::size_t recorded_ = 0;  // recorded decisions seen so far for that event
    bool trace_has_decisions_ = false;
    std::optional<std::string> first_difference_;
};

}  // namespace

int replay(std::istream& trace, std::ostream& decisions, std::ostream& errors) {
    try {
        std::string text;
        std::size_t line_number = 1;
        if (!next_line(trace, text, line_number)) {
            throw TraceError(json_error_message(line_label(line_number), "", "the trace header", "an empty trace"));
        }
        Replayer replayer(parse_header(parse_line(text, line_number), line_number), decisions);
        while (!replayer.mismatch() && next_line(trace, text, line_number + 1)) {
            ++line_number;
            replayer.feed(parse_line(text, line_number), line_number);
        }
        replayer.finish();
        if (const auto mismatch = replayer.mismatch()) {
            errors << *mismatch << '\n';
            return kReplayDiffered;
        }
        return kReplayAgreed;
    } catch (const TraceError& error) {
        errors << error.what() << '\n';
        return kTraceMalformed;
    }
}

int run_replay_command(const std::string& path) {
    std::ostringstream errors;
    int status = kTraceMalformed;
    try {
        InputFileStream trace(path, kMaxTraceFileBytes);
        status = replay(trace, std::cout, errors);
    } catch (const InputFileError& error) {
        std::cerr << error.what() << '\n';
        return kTraceMalformed;
    }
    // replay's messages name the line; the file is named here, as the loaders name theirs.
    std::istringstream lines(errors.str());
    for (std::string line; std::getline(lines, line);) std::cerr << json_file_message(path, line) << '\n';
    return status;
}

}  // namespace comfy::arbiter
