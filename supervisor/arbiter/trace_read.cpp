#include "supervisor/arbiter/trace.hpp"

#include "shared/byte_size.hpp"
#include "shared/input_file.hpp"
#include "shared/json_errors.hpp"
#include "shared/message_header.hpp"
#include "shared/segment_layout.hpp"
#include "supervisor/arbiter/arbiter.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <iostream>
#include <limits>
#include <optional>
#include <span>
#include <sstream>
#include <string_view>
#include <vector>

namespace comfy::arbiter {

namespace {

using Pointer = TraceJson::json_pointer;

constexpr std::string_view kTraceName = "comfy-supervisor-arbiter";

// ---- names as written in a trace, indexed by the enum's value ----

constexpr auto kNoFitNames = choice_names(kNoFitPolicies);
static_assert([] {
    for (std::size_t i = 0; i < kNoFitNames.size(); ++i) {
        if (static_cast<std::size_t>(kNoFitPolicies[i].second) != i) return false;
    }
    return true;
}(), "kNoFitPolicies lists the policies in the enum's order");
constexpr std::array<std::string_view, kVramStateCount> kVramStateNames{
    "disabled", "no_vram", "low_vram", "normal_vram", "high_vram", "shared"};
constexpr std::array<std::string_view, kModelKindCount> kModelKindNames{
    "unknown", "diffusion", "text_encoder", "vae", "clip_vision", "controlnet", "other"};
constexpr std::array<std::string_view, kRefusalReasonCount> kRefusalReasonNames{"no_fit", "timed_out",
                                                                                "shutting_down"};
constexpr std::array<std::string_view, kStandInOutcomeCount> kStandInOutcomeNames{"unloaded", "owner_gone", "deferred",
                                                                                  "timed_out", "refused"};

// Every value written was validated first (by the message codec or the config loader);
// one that was not throws here rather than reading past the table.
template <std::size_t N>
std::string name_of(const std::array<std::string_view, N>& names, std::size_t value) {
    return std::string(names.at(value));
}

std::string line_label(std::size_t line_number) { return "line " + std::to_string(line_number); }

// A byte count as the writer leaves it (a whole number), or as a person writing a trace
// by hand may put it ("20GiB"); never above kMaxBytes, as in the messages themselves.
std::optional<Bytes> as_bytes(const TraceJson& value) {
    const auto bytes = value.is_string() ? parse_byte_size(value.get_ref<const std::string&>()) : as_unsigned(value);
    if (!bytes || *bytes > kMaxBytes) return std::nullopt;
    return bytes;
}

const std::string kByteCount = "a byte count up to " + format_byte_size_exact(kMaxBytes) +
                               " (a whole number, or a size like \"20GiB\")";

// ---- reading ----

// A JSON object on one trace line, read field by field. Every failure throws a
// TraceError naming the line and the field's path within it.
class Fields {
public:
    Fields(const TraceJson& value, Pointer at, std::size_t line_number)
        : value_(value), at_(std::move(at)), line_number_(line_number) {
        if (!value_.is_object()) fail(at_, "an object", describe(value_));
    }

    template <typename Unsigned = std::uint64_t>
    Unsigned whole(const char* key) const {
        constexpr auto max = std::numeric_limits<Unsigned>::max();
        const std::string expected = "a whole number up to " + std::to_string(max);
        const TraceJson& value = member(key, expected);
        const auto number = as_unsigned(value);
        if (!number || *number > max) wrong(key, expected, value);
        return static_cast<Unsigned>(*number);
    }

    Bytes bytes(const char* key) const {
        const TraceJson& value = member(key, kByteCount);
        const auto bytes = as_bytes(value);
        if (!bytes) wrong(key, kByteCount, value);
        return *bytes;
    }

    // A byte figure that may be unknown, written null: unknown is never read as zero.
    Bytes bytes_or_unknown(const char* key) const {
        const std::string expected = kByteCount + ", or null for unknown";
        const TraceJson& value = member(key, expected);
        if (value.is_null()) return kUnknownBytes;
        const auto bytes = as_bytes(value);
        if (!bytes) wrong(key, expected, value);
        return *bytes;
    }

    bool flag(const char* key) const {
        const TraceJson& value = member(key, "true or false");
        if (!value.is_boolean()) wrong(key, "true or false", value);
        return value.get<bool>();
    }

    std::string text(const char* key) const {
        const TraceJson& value = member(key, "a string");
        if (!value.is_string()) wrong(key, "a string", value);
        return value.get<std::string>();
    }

    // The index of the name found among `names`.
    std::size_t choice(const char* key, std::span<const std::string_view> names) const {
        const std::string expected = "one of " + quoted_names(names);
        const TraceJson& value = member(key, expected);
        if (value.is_string()) {
            const auto found = std::find(names.begin(), names.end(), value.get_ref<const std::string&>());
            if (found != names.end()) return static_cast<std::size_t>(found - names.begin());
        }
        wrong(key, expected, value);
    }

    // A field that must hold exactly `wanted`, such as the header's version.
    void require(const char* key, const TraceJson& wanted) const {
        const std::string expected = wanted.dump();
        const TraceJson& value = member(key, expected);
        if (value != wanted) wrong(key, expected, value);
    }

    std::vector<std::uint64_t> ids(const char* key, std::size_t max_count) const {
        const std::string expected = "a list of at most " + std::to_string(max_count) + " model ids";
        const TraceJson& list = member(key, expected);
        if (!list.is_array() || list.size() > max_count) wrong(key, expected, list);
        std::vector<std::uint64_t> ids;
        for (std::size_t i = 0; i < list.size(); ++i) {
            const auto id = as_unsigned(list[i]);
            if (!id) fail(at_ / key / i, "a model id (a whole number)", describe(list[i]));
            ids.push_back(*id);
        }
        return ids;
    }

    Fields object(const char* key) const { return Fields(member(key, "an object"), at_ / key, line_number_); }

    // Each member of this object, itself read as an object, with its key.
    std::vector<std::pair<std::string, Fields>> objects() const {
        std::vector<std::pair<std::string, Fields>> members;
        for (const auto& [key, value] : value_.items()) {
            members.emplace_back(key, Fields(value, at_ / key, line_number_));
        }
        return members;
    }

    [[noreturn]] void bad_key(const std::string& key, std::string_view expected) const {
        fail(at_ / key, expected, describe_json_value(key));
    }

    // A member that was read but is not what the reader can use.
    [[noreturn]] void reject(const char* key, std::string_view expected) const {
        wrong(key, expected, member(key, expected));
    }

private:
    const TraceJson& member(const char* key, std::string_view expected) const {
        const auto found = value_.find(key);
        if (found == value_.end()) fail(at_ / key, expected, kFoundNothing);
        return *found;
    }

    [[noreturn]] void wrong(const char* key, std::string_view expected, const TraceJson& found) const {
        fail(at_ / key, expected, describe(found));
    }

    [[noreturn]] void fail(const Pointer& at, std::string_view expected, std::string_view found) const {
        throw TraceError(json_error_message(line_label(line_number_), at.to_string(), expected, found));
    }

    static std::string describe(const TraceJson& value) { return describe_json_value(value); }

    const TraceJson& value_;
    Pointer at_;
    std::size_t line_number_;
};

Participant read_participant(const Fields& line) {
    return {line.whole<std::uint32_t>("slot"), line.whole<std::uint32_t>("generation")};
}

ParticipantFigures read_figures(const Fields& figures) {
    return {figures.bytes("allocator_reserved"), figures.bytes("allocator_active"), figures.bytes("pinned")};
}

std::uint32_t read_slot_key(const Fields& participants, const std::string& key) {
    std::uint32_t slot = 0;
    const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), slot);
    if (key.empty() || error != std::errc{} || end != key.data() + key.size()) {
        participants.bad_key(key, "a slot number as the key");
    }
    return slot;
}

Snapshot read_snapshot(const Fields& snapshot) {
    Snapshot read{snapshot.whole("now_ms"), snapshot.bytes("device_total"), snapshot.bytes("device_free"), {}};
    const Fields participants = snapshot.object("participants");
    for (const auto& [key, figures] : participants.objects()) {
        read.participants[read_slot_key(participants, key)] = read_figures(figures);
    }
    return read;
}

Event read_joined(const Fields& line) { return event::Joined{read_participant(line)}; }
Event read_left(const Fields& line) { return event::Left{read_participant(line)}; }
Event read_busy(const Fields& line) { return event::Busy{read_participant(line), line.flag("busy")}; }

Event read_registered(const Fields& line) {
    ModelRegistered report{};
    report.model_id = line.whole("model_id");
    report.weights_id = line.whole("weights_id");
    report.total_bytes = line.bytes("total_bytes");
    report.loaded_bytes = line.bytes_or_unknown("loaded_bytes");
    report.device = line.whole<std::uint32_t>("device");
    report.kind = static_cast<std::uint16_t>(line.choice("kind", kModelKindNames));
    report.dynamic = line.flag("dynamic");
    return event::Registered{read_participant(line), report};
}

Event read_residency(const Fields& line) {
    ResidencyReceipt report{};
    report.model_id = line.whole("model_id");
    report.sequence = line.whole("sequence");
    report.loaded_bytes = line.bytes_or_unknown("loaded_bytes");
    report.references = line.whole<std::uint32_t>("references");
    report.currently_used = line.flag("currently_used");
    report.just_used = line.flag("just_used");
    return event::Residency{read_participant(line), report};
}

Event read_dropped(const Fields& line) { return event::Dropped{read_participant(line), line.whole("model_id")}; }

Event read_admission(const Fields& line) {
    AdmissionRequest request{};
    request.device = line.whole<std::uint32_t>("device");
    request.streams = line.whole<std::uint32_t>("streams");
    request.bytes = line.bytes("bytes");
    request.largest_tensor = line.bytes("largest_tensor");
    request.pinned_bytes = line.bytes("pinned_bytes");
    auto keep = line.ids("keep_loaded", std::numeric_limits<std::uint32_t>::max());
    request.keep_loaded_count = static_cast<std::uint32_t>(keep.size());
    request.flags = line.flag("for_dynamic") ? kAdmitForDynamic : 0;
    return event::Admission{read_participant(line), line.whole("correlation"), request, std::move(keep)};
}

Event read_unloaded(const Fields& line) {
    UnloadReceipt receipt{};
    receipt.model_id = line.whole("model_id");
    receipt.bytes_requested = line.bytes("bytes_requested");
    receipt.bytes_freed = line.bytes("bytes_freed");
    receipt.sequence = line.whole("sequence");
    receipt.loaded_bytes = line.bytes_or_unknown("loaded_bytes");
    receipt.deferred = line.flag("deferred");
    return event::Unloaded{read_participant(line), receipt};
}

Event read_tick(const Fields&) { return event::Tick{}; }

// The release messages a release receipt can answer (is_release), in the order of their
// values, and their names (to_string).
struct ReleaseTypes {
    std::vector<MessageType> types;
    std::vector<std::string_view> names;
};

const ReleaseTypes& release_types() {
    static const ReleaseTypes table = [] {
        ReleaseTypes release;
        for (std::uint16_t value = kFirstMessageType; value <= kLastMessageType; ++value) {
            const auto type = static_cast<MessageType>(value);
            if (!is_release(type)) continue;
            release.types.push_back(type);
            release.names.push_back(to_string(type));
        }
        return release;
    }();
    return table;
}

Event read_released(const Fields& line) {
    const ReleaseTypes& release = release_types();
    ReleaseReceipt receipt{};
    receipt.release_type = static_cast<std::uint16_t>(release.types[line.choice("release_type", release.names)]);
    receipt.deferred = line.flag("deferred");
    receipt.bytes_requested = line.bytes("bytes_requested");
    receipt.bytes_freed = line.bytes("bytes_freed");
    return event::Released{read_participant(line), receipt};
}

Event read_standin(const Fields& line) {
    StandInUnload request{};
    request.owner_slot = line.whole<std::uint32_t>("owner_slot");
    request.owner_generation = line.whole<std::uint32_t>("owner_generation");
    request.model_id = line.whole("model_id");
    request.bytes = line.bytes("bytes");
    request.detach = line.flag("detach");
    return event::StandIn{read_participant(line), line.whole("correlation"), request};
}

Action read_partial_unload(const Fields& line) {
    const PartialUnload command{line.whole("model_id"), line.bytes("bytes")};
    return action::SendPartialUnload{read_participant(line), command};
}

Action read_detach(const Fields& line) {
    return action::SendDetach{read_participant(line), Detach{line.whole("model_id")}};
}

Action read_grant(const Fields& line) {
    AdmissionGrant grant{};
    grant.device_free = line.bytes("device_free");
    grant.reserve_bytes = line.bytes("reserve_bytes");
    grant.shortfall = line.bytes("shortfall");
    grant.vram_state = static_cast<std::uint32_t>(line.choice("vram_state", kVramStateNames));
    return action::Grant{read_participant(line), line.whole("correlation"), grant};
}

Action read_refuse(const Fields& line) {
    AdmissionRefused refusal{};
    refusal.needed_bytes = line.bytes("needed_bytes");
    refusal.device_free = line.bytes("device_free");
    refusal.held_by_others = line.bytes("held_by_others");
    refusal.reason = static_cast<std::uint32_t>(line.choice("reason", kRefusalReasonNames));
    return action::Refuse{read_participant(line), line.whole("correlation"), refusal};
}

Action read_note(const Fields& line) { return action::Note{line.text("text")}; }

Action read_partial_release(const Fields& line) {
    return action::SendPartialRelease{read_participant(line), PartialRelease{line.bytes("bytes")}};
}

Action read_standin_answer(const Fields& line) {
    StandInResult result{};
    result.model_id = line.whole("model_id");
    result.bytes_freed = line.bytes("bytes_freed");
    result.loaded_bytes = line.bytes_or_unknown("loaded_bytes");
    result.outcome = static_cast<std::uint32_t>(line.choice("outcome", kStandInOutcomeNames));
    return action::AnswerStandIn{read_participant(line), line.whole("correlation"), result};
}

// The kinds in the order of the variants' alternatives, so that a value's kind is
// kinds[value.index()] and one table gives both the name written and the reader.
struct EventKind {
    std::string_view name;
    Event (*read)(const Fields&);
};
constexpr std::array<EventKind, 11> kEventKinds{{{"joined", read_joined},
                                                {"left", read_left},
                                                {"busy", read_busy},
                                                {"registered", read_registered},
                                                {"residency", read_residency},
                                                {"dropped", read_dropped},
                                                {"admission", read_admission},
                                                {"unloaded", read_unloaded},
                                                {"tick", read_tick},
                                                {"released", read_released},
                                                {"standin", read_standin}}};
static_assert(kEventKinds.size() == std::variant_size_v<Event>);

struct DecisionKind {
    std::string_view name;
    Action (*read)(const Fields&);
};
constexpr std::array<DecisionKind, 7> kDecisionKinds{{{"partial_unload", read_partial_unload},
                                                      {"detach", read_detach},
                                                      {"grant", read_grant},
                                                      {"refuse", read_refuse},
                                                      {"note", read_note},
                                                      {"partial_release", read_partial_release},
                                                      {"standin_answer", read_standin_answer}}};
static_assert(kDecisionKinds.size() == std::variant_size_v<Action>);

template <typename Kind, std::size_t N>
constexpr std::array<std::string_view, N> names_of(const std::array<Kind, N>& kinds) {
    std::array<std::string_view, N> names{};
    std::transform(kinds.begin(), kinds.end(), names.begin(), [](const Kind& kind) { return kind.name; });
    return names;
}
constexpr auto kEventNames = names_of(kEventKinds);
constexpr auto kDecisionNames = names_of(kDecisionKinds);

// ---- writing ----

TraceJson bytes_or_null(Bytes bytes) { return bytes == kUnknownBytes ? TraceJson(nullptr) : TraceJson(bytes); }

void add_participant(TraceJson& line, const Participant& who) {
    line["slot"] = who.slot;
    line["generation"] = who.generation;
}

void add_fields(TraceJson& line, const event::Joined& e) { add_participant(line, e.who); }
void add_fields(TraceJson& line, const event::Left& e) { add_participant(line, e.who); }

void add_fields(TraceJson& line, const event::Busy& e) {
    add_participant(line, e.who);
    line["busy"] = e.busy;
}

void add_fields(TraceJson& line, const event::Registered& e) {
    add_participant(line, e.who);
    line["model_id"] = e.report.model_id;
    line["weights_id"] = e.report.weights_id;
    line["total_bytes"] = e.report.total_bytes;
    line["loaded_bytes"] = bytes_or_null(e.report.loaded_bytes);
    line["device"] = e.report.device;
    line["kind"] = name_of(kModelKindNames, e.report.kind);
    line["dynamic"] = e.report.dynamic != 0;
}

void add_fields(TraceJson& line, const event::Residency& e) {
    add_participant(line, e.who);
    line["model_id"] = e.report.model_id;
    line["sequence"] = e.report.sequence;
    line["loaded_bytes"] = bytes_or_null(e.report.loaded_bytes);
    line["references"] = e.report.references;
    line["currently_used"] = e.report.currently_used != 0;
    line["just_used"] = e.report.just_used != 0;
}

void add_fields(TraceJson& line, const event::Dropped& e) {
    add_participant(line, e.who);
    line["model_id"] = e.model_id;
}

void add_fields(TraceJson& line, const event::Admission& e) {
    const AdmissionRequest& r = e.request;
    add_participant(line, e.who);
    line["correlation"] = e.correlation;
    line["device"] = r.device;
    line["streams"] = r.streams;
    line["bytes"] = r.bytes;
    line["largest_tensor"] = r.largest_tensor;
    line["pinned_bytes"] = r.pinned_bytes;
    line["keep_loaded"] = e.keep_loaded;
    line["for_dynamic"] = (r.flags & kAdmitForDynamic) != 0;
}

void add_fields(TraceJson& line, const event::Unloaded& e) {
    add_participant(line, e.who);
    line["model_id"] = e.receipt.model_id;
    line["bytes_requested"] = e.receipt.bytes_requested;
    line["bytes_freed"] = e.receipt.bytes_freed;
    line["sequence"] = e.receipt.sequence;
    line["loaded_bytes"] = bytes_or_null(e.receipt.loaded_bytes);
    line["deferred"] = e.receipt.deferred != 0;
}

void add_fields(TraceJson&, const event::Tick&) {}

void add_fields(TraceJson& line, const event::Released& e) {
    add_participant(line, e.who);
    const auto type = static_cast<MessageType>(e.receipt.release_type);
    if (!is_release(type)) throw TraceError("a release receipt answers no release message");
    line["release_type"] = to_string(type);
    line["deferred"] = e.receipt.deferred != 0;
    line["bytes_requested"] = e.receipt.bytes_requested;
    line["bytes_freed"] = e.receipt.bytes_freed;
}

void add_fields(TraceJson& line, const event::StandIn& e) {
    add_participant(line, e.who);
    line["correlation"] = e.correlation;
    line["owner_slot"] = e.request.owner_slot;
    line["owner_generation"] = e.request.owner_generation;
    line["model_id"] = e.request.model_id;
    line["bytes"] = e.request.bytes;
    line["detach"] = e.request.detach != 0;
}

void add_fields(TraceJson& line, const action::AnswerStandIn& a) {
    add_participant(line, a.to);
    line["correlation"] = a.correlation;
    line["model_id"] = a.result.model_id;
    line["bytes_freed"] = a.result.bytes_freed;
    line["loaded_bytes"] = bytes_or_null(a.result.loaded_bytes);
    line["outcome"] = name_of(kStandInOutcomeNames, a.result.outcome);
}

void add_fields(TraceJson& line, const action::SendPartialRelease& a) {
    add_participant(line, a.to);
    line["bytes"] = a.command.bytes;
}

void add_fields(TraceJson& line, const action::SendPartialUnload& a) {
    add_participant(line, a.to);
    line["model_id"] = a.command.model_id;
    line["bytes"] = a.command.bytes;
}

void add_fields(TraceJson& line, const action::SendDetach& a) {
    add_participant(line, a.to);
    line["model_id"] = a.command.model_id;
}

void add_fields(TraceJson& line, const action::Grant& a) {
    add_participant(line, a.to);
    line["correlation"] = a.correlation;
    line["device_free"] = a.grant.device_free;
    line["reserve_bytes"] = a.grant.reserve_bytes;
    line["shortfall"] = a.grant.shortfall;
    line["vram_state"] = name_of(kVramStateNames, a.grant.vram_state);
}

void add_fields(TraceJson& line, const action::Refuse& a) {
    add_participant(line, a.to);
    line["correlation"] = a.correlation;
    line["needed_bytes"] = a.refusal.needed_bytes;
    line["device_free"] = a.refusal.device_free;
    line["held_by_others"] = a.refusal.held_by_others;
    line["reason"] = name_of(kRefusalReasonNames, a.refusal.reason);
}

void add_fields(TraceJson& line, const action::Note& a) { line["text"] = a.text; }

TraceJson snapshot_json(const Snapshot& snapshot) {
    TraceJson participants = TraceJson::object();
    for (const auto& [slot, figures] : snapshot.participants) {
        participants[std::to_string(slot)] = {{"allocator_reserved", figures.allocator_reserved},
                                              {"allocator_active", figures.allocator_active},
                                              {"pinned", figures.pinned}};
    }
    return {{"now_ms", snapshot.now_ms},
            {"device_total", snapshot.device_total},
            {"device_free", snapshot.device_free},
            {"participants", std::move(participants)}};
}

// One line of text. Invalid UTF-8 (only a note's text could hold any) is replaced
// rather than thrown on, so recording never stops the supervisor over a log text.
std::string line_text(const TraceJson& line) {
    return line.dump(-1, ' ', /*ensure_ascii=*/false, TraceJson::error_handler_t::replace);
}

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

// ---- replay ----

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

// ---- the public functions ----

TraceJson header_json(const ArbiterConfig& config, std::uint32_t ledger_capacity) {
    return {{"trace", kTraceName},
            {"version", kTraceVersion},
            {"config",
             {{"base_reserve", config.base_reserve},
              {"no_fit", name_of(kNoFitNames, static_cast<std::size_t>(config.no_fit))},
              {"wait_timeout_ms", config.wait_timeout_ms},
              {"answer_timeout_ms", config.answer_timeout_ms},
              {"vram_state", name_of(kVramStateNames, static_cast<std::size_t>(config.vram_state))},
              {"smart_memory", config.smart_memory}}},
            {"ledger_capacity", ledger_capacity}};
}

TraceJson to_json(const Event& event, const Snapshot& snapshot) {
    TraceJson line{{"event", kEventKinds[event.index()].name}};
    std::visit([&line](const auto& e) { add_fields(line, e); }, event);
    line["snapshot"] = snapshot_json(snapshot);
    return line;
}

TraceJson to_json(const Action& action) {
    TraceJson line{{"decision", kDecisionKinds[action.index()].name}};
    std::visit([&line](const auto& a) { add_fields(line, a); }, action);
    return line;
}

TraceHeader parse_header(const TraceJson& line, std::size_t line_number) {
    const Fields header(line, Pointer(), line_number);
    header.require("trace", kTraceName);
    header.require("version", kTraceVersion);
    const Fields fields = header.object("config");
    ArbiterConfig config;
    config.base_reserve = fields.bytes("base_reserve");
    config.no_fit = static_cast<NoFitPolicy>(fields.choice("no_fit", kNoFitNames));
    config.wait_timeout_ms = fields.whole("wait_timeout_ms");
    config.answer_timeout_ms = fields.whole("answer_timeout_ms");
    config.vram_state = static_cast<VramState>(fields.choice("vram_state", kVramStateNames));
    config.smart_memory = fields.flag("smart_memory");
    // The arbiter allocates its ledger up front: only what a segment allows, so that a
    // header cannot ask replay for gigabytes.
    Capacities probe;
    probe.ledger_entries = header.whole<std::uint32_t>("ledger_capacity");
    if (const auto problem = probe.validate(); !problem.empty()) {
        header.reject("ledger_capacity", "a ledger capacity the shared segment allows (" + problem + ")");
    }
    return {config, probe.ledger_entries};
}

TraceEntry parse_event_line(const TraceJson& line, std::size_t line_number) {
    const Fields fields(line, Pointer(), line_number);
    const auto read_event = kEventKinds[fields.choice("event", kEventNames)].read;
    return {read_event(fields), read_snapshot(fields.object("snapshot"))};
}

Action parse_decision_line(const TraceJson& line, std::size_t line_number) {
    const Fields fields(line, Pointer(), line_number);
    return kDecisionKinds[fields.choice("decision", kDecisionNames)].read(fields);
}

TraceRecorder::TraceRecorder(const std::string& path, const ArbiterConfig& config, std::uint32_t ledger_capacity)
    : path_(path),
      // Close-on-exec ("e"): the workers the supervisor spawns must not inherit the trace.
      file_(std::fopen(path.c_str(), "we")) {
    if (!file_) throw TraceError(json_file_message(path_, "cannot open for writing: " + system_message(errno)));
    write_line(header_json(config, ledger_capacity));
}

void TraceRecorder::record(const Event& event, const Snapshot& snapshot, const std::vector<Action>& actions) {
    write_line(to_json(event, snapshot));
    for (const Action& action : actions) write_line(to_json(action));
}

void TraceRecorder::write_line(const TraceJson& line) {
    const std::string text = line_text(line) + '\n';
    if (std::fwrite(text.data(), 1, text.size(), file_.get()) != text.size() || std::fflush(file_.get()) != 0) {
        throw TraceError(json_file_message(path_, "cannot write: " + system_message(errno)));
    }
}

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
