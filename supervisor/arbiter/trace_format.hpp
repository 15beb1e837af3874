#pragma once
// How a trace writes things down, shared by reading (trace_read.cpp), writing
// (trace_write.cpp) and replay (trace_replay.cpp): the trace's name, the names written for
// each kind of event and decision and for the enums' values, and how a line is printed
// and named in a message. Private to those three files.

#include "shared/json_errors.hpp"
#include "supervisor/arbiter/arbiter_io.hpp"
#include "supervisor/arbiter/trace.hpp"

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <variant>

namespace comfy::arbiter {

inline constexpr std::string_view kTraceName = "comfy-supervisor-arbiter";

// ---- names as written in a trace, indexed by the enum's value ----

inline constexpr auto kNoFitNames = choice_names(kNoFitPolicies);
static_assert([] {
    for (std::size_t i = 0; i < kNoFitNames.size(); ++i) {
        if (static_cast<std::size_t>(kNoFitPolicies[i].second) != i) return false;
    }
    return true;
}(), "kNoFitPolicies lists the policies in the enum's order");
inline constexpr std::array<std::string_view, kVramStateCount> kVramStateNames{
    "disabled", "no_vram", "low_vram", "normal_vram", "high_vram", "shared"};
inline constexpr std::array<std::string_view, kModelKindCount> kModelKindNames{
    "unknown", "diffusion", "text_encoder", "vae", "clip_vision", "controlnet", "other"};
inline constexpr std::array<std::string_view, kRefusalReasonCount> kRefusalReasonNames{"no_fit", "timed_out",
                                                                                       "shutting_down"};
inline constexpr std::array<std::string_view, kStandInOutcomeCount> kStandInOutcomeNames{
    "unloaded", "owner_gone", "deferred", "timed_out", "refused"};

// The kinds in the order of the variants' alternatives, so that a value's kind is
// written kEventNames[value.index()]. trace_read.cpp lists its readers in the same order.
inline constexpr std::array<std::string_view, 11> kEventNames{
    "joined", "left", "busy", "registered", "residency", "dropped", "admission", "unloaded", "tick", "released",
    "standin"};
static_assert(kEventNames.size() == std::variant_size_v<Event>);

inline constexpr std::array<std::string_view, 8> kDecisionNames{
    "partial_unload", "detach", "grant", "refuse", "note", "partial_release", "standin_answer", "deaf"};
static_assert(kDecisionNames.size() == std::variant_size_v<Action>);

// ---- lines ----

inline std::string line_label(std::size_t line_number) { return "line " + std::to_string(line_number); }

// One line of text. Invalid UTF-8 (only a note's text could hold any) is replaced
// rather than thrown on, so recording never stops the supervisor over a log text.
inline std::string line_text(const TraceJson& line) {
    return line.dump(-1, ' ', /*ensure_ascii=*/false, TraceJson::error_handler_t::replace);
}

}  // namespace comfy::arbiter
