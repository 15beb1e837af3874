// Writing a trace: the header, event and decision lines as JSON (header_json, to_json),
// and the TraceRecorder that appends them to a file as the arbiter runs.
#include "supervisor/arbiter/trace.hpp"

#include "shared/json_errors.hpp"
#include "shared/message_header.hpp"
#include "supervisor/arbiter/trace_format.hpp"

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace comfy::arbiter {

namespace {

// Every value written was validated first (by the message codec or the config loader);
// one that was not throws here rather than reading past the table.
template <std::size_t N>
std::string name_of(const std::array<std::string_view, N>& names, std::size_t value) {
    return std::string(names.at(value));
}

TraceJson bytes_or_null(Bytes bytes) { return bytes == kUnknownBytes ? TraceJson(nullptr) : TraceJson(bytes); }

void add_participant(TraceJson& line, const Participant& who) {
    line["slot"] = who.slot;
    line["generation"] = who.generation;
}

void add_fields(TraceJson& line, const event::Joined& e) {
    add_participant(line, e.who);
    line["name"] = e.name;
}
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
    line["name"] = name_in(e.report.name);
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

void add_fields(TraceJson& line, const action::Deafness& a) {
    add_participant(line, a.who);
    line["deaf"] = a.deaf;
}

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

}  // namespace

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
    TraceJson line{{"event", kEventNames[event.index()]}};
    std::visit([&line](const auto& e) { add_fields(line, e); }, event);
    line["snapshot"] = snapshot_json(snapshot);
    return line;
}

TraceJson to_json(const Action& action) {
    TraceJson line{{"decision", kDecisionNames[action.index()]}};
    std::visit([&line](const auto& a) { add_fields(line, a); }, action);
    return line;
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

}  // namespace comfy::arbiter
