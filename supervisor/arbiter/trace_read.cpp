// Reading a trace: each line's JSON back into the arbiter's config, events, snapshots and
// decisions (parse_header, parse_event_line, parse_decision_line). Every failure is a
// TraceError naming the line and the field's path within it.
#include "supervisor/arbiter/trace.hpp"

#include "shared/byte_size.hpp"
#include "shared/json_errors.hpp"
#include "shared/message_header.hpp"
#include "shared/segment_layout.hpp"
#include "supervisor/arbiter/trace_format.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace comfy::arbiter {

namespace {

using Pointer = TraceJson::json_pointer;

// A byte count as the writer leaves it (a whole number), or as a person writing a trace
// by hand may put it ("20GiB"); never above kMaxBytes, as in the messages themselves.
std::optional<Bytes> as_bytes(const TraceJson& value) {
    const auto bytes = value.is_string() ? parse_byte_size(value.get_ref<const std::string&>()) : as_unsigned(value);
    if (!bytes || *bytes > kMaxBytes) return std::nullopt;
    return bytes;
}

const std::string kByteCount = "a byte count up to " + format_byte_size_exact(kMaxBytes) +
                               " (a whole number, or a size like \"20GiB\")";

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

    // A name of at most `max_bytes` printable ASCII characters; empty when the key is
    // absent (a trace recorded before names were carried).
    std::string name(const char* key, std::size_t max_bytes) const {
        if (!value_.contains(key)) return {};
        const std::string expected = "a name of at most " + std::to_string(max_bytes) + " printable ASCII characters";
        const TraceJson& value = member(key, expected);
        if (!value.is_string()) wrong(key, expected, value);
        const auto& text = value.get_ref<const std::string&>();
        if (text.size() > max_bytes || !std::all_of(text.begin(), text.end(), is_printable_ascii)) {
            wrong(key, expected, value);
        }
        return text;
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

Event read_joined(const Fields& line) {
    return event::Joined{read_participant(line), line.name("name", kPackNameBytes - 1)};
}
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
    set_name(report.name, line.name("name", kModelNameBytes - 1));
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

Action read_deafness(const Fields& line) { return action::Deafness{read_participant(line), line.flag("deaf")}; }

// The readers, in the order of kEventNames and kDecisionNames (the variants'
// alternatives), so that the name read picks the reader.
constexpr std::array kEventReaders{read_joined, read_left, read_busy, read_registered, read_residency, read_dropped,
                                   read_admission, read_unloaded, read_tick, read_released, read_standin};
static_assert(kEventReaders.size() == kEventNames.size());

constexpr std::array kDecisionReaders{read_partial_unload, read_detach, read_grant, read_refuse, read_note,
                                      read_partial_release, read_standin_answer, read_deafness};
static_assert(kDecisionReaders.size() == kDecisionNames.size());

}  // namespace

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
    const auto read_event = kEventReaders[fields.choice("event", kEventNames)];
    return {read_event(fields), read_snapshot(fields.object("snapshot"))};
}

Action parse_decision_line(const TraceJson& line, std::size_t line_number) {
    const Fields fields(line, Pointer(), line_number);
    return kDecisionReaders[fields.choice("decision", kDecisionNames)](fields);
}

}  // namespace comfy::arbiter
