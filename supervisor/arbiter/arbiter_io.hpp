#pragma once
// What the arbiter takes in and gives out. The arbiter is a pure core: it reads only the
// Snapshot handed in with each event, keeps no clock of its own and does no I/O, so it
// is deterministic: the same events give the same actions (replay relies on it).

#include "shared/memory_arithmetic.hpp"
#include "shared/message_payloads.hpp"

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace comfy::arbiter {

// What to do when an admission still does not fit after every possible eviction.
enum class NoFitPolicy { admit, wait, refuse };

// The policies by name, as a config and a trace write them, in the enum's order.
inline constexpr std::pair<std::string_view, NoFitPolicy> kNoFitPolicies[] = {
    {"admit", NoFitPolicy::admit},
    {"wait", NoFitPolicy::wait},
    {"refuse", NoFitPolicy::refuse},
};

struct ArbiterConfig {
    Bytes base_reserve = kDefaultReserve;
    NoFitPolicy no_fit = NoFitPolicy::admit;
    std::uint64_t wait_timeout_ms = 30'000;   // policy wait: refuse after this long
    std::uint64_t answer_timeout_ms = 5'000;  // an owner that does not answer an eviction
    VramState vram_state = VramState::normal_vram;
    // Off is upstream's --disable-smart-memory: free_memory's memory_to_free is 1e32, so
    // every admission detaches every model on the device that it does not keep.
    bool smart_memory = true;
};

// Per participant, what its census says (the supervisor validated it).
struct ParticipantFigures {
    Bytes allocator_reserved = 0;
    Bytes allocator_active = 0;
    Bytes pinned = 0;
};

// The world as it stands when an event is handled.
struct Snapshot {
    std::uint64_t now_ms = 0;
    Bytes device_total = 0;
    Bytes device_free = 0;  // the driver's reading, device-wide
    std::map<std::uint32_t, ParticipantFigures> participants;  // by slot
};

// What the participant in `slot` would read as free (upstream's get_free_memory): the
// driver's figure plus its own allocator cache, from its census.
inline Bytes free_reported_to(const Snapshot& snapshot, std::uint32_t slot) {
    const auto found = snapshot.participants.find(slot);
    const ParticipantFigures figures = found == snapshot.participants.end() ? ParticipantFigures{} : found->second;
    return free_for_asker(snapshot.device_free, figures.allocator_reserved, figures.allocator_active);
}

struct Participant {
    std::uint32_t slot;
    std::uint32_t generation;
};

namespace event {
// name: its pack's, for the notes (empty in a trace recorded before names were).
struct Joined { Participant who; std::string name{}; };
struct Left { Participant who; };
struct Busy { Participant who; bool busy; };
struct Registered { Participant who; ModelRegistered report; };
struct Residency { Participant who; ResidencyReceipt report; };
struct Dropped { Participant who; std::uint64_t model_id; };
// keep_loaded: machine_model_key()s of the models to leave alone (the request's
// admission_keep messages), of any number.
struct Admission {
    Participant who;
    std::uint64_t correlation;
    AdmissionRequest request;
    std::vector<std::uint64_t> keep_loaded{};
};
struct Unloaded { Participant who; UnloadReceipt receipt; };
struct Tick {};
struct Released { Participant who; ReleaseReceipt receipt; };  // answers a release message
// The host's eviction reached the stand-in entry of another participant's model.
struct StandIn { Participant who; std::uint64_t correlation; StandInUnload request; };
}  // namespace event

using Event = std::variant<event::Joined, event::Left, event::Busy, event::Registered, event::Residency,
                           event::Dropped, event::Admission, event::Unloaded, event::Tick, event::Released,
                           event::StandIn>;

namespace action {
struct SendPartialUnload { Participant to; PartialUnload command; };
struct SendDetach { Participant to; Detach command; };
struct Grant { Participant to; std::uint64_t correlation; AdmissionGrant grant; };
struct Refuse { Participant to; std::uint64_t correlation; AdmissionRefused refusal; };
// What a note is about, for the log's fields (COMFY_PACK, COMFY_MODEL...): the participant
// and the model it names, where it names one. Not part of a trace: the text is.
struct NoteSubject {
    Participant who{0, 0};       // generation 0: it names no participant
    std::uint64_t model_id = 0;  // 0: no model named
    std::string model;           // the model's name, maybe empty

    bool names_participant() const noexcept { return who.generation != 0; }
};
struct Note { std::string text; NoteSubject subject{}; };  // a decision worth a log line
// When the ledger has nothing more to give, idle siblings free what they can of the rest
// (caches, buffers) up to the shortfall.
struct SendPartialRelease { Participant to; PartialRelease command; };
// What a stand-in unload came to, for the host that asked.
struct AnswerStandIn { Participant to; std::uint64_t correlation; StandInResult result; };
// The participant let a command go unanswered past the answer time-out and is passed over
// from now on (deaf), or it answered again and is asked as any other (not deaf). The
// supervisor tells the operator and applies memory.deaf_participant.
struct Deafness { Participant who; bool deaf; };
}  // namespace action

// How a note (and the supervisor's log) names a model: `model 3 "SDXL (sd_xl_base.safetensors)"`,
// or `model 3` without a name; the number always, since scripts read it.
inline std::string model_text(std::uint64_t model_id, std::string_view name) {
    const std::string number = "model " + std::to_string(model_id);
    return name.empty() ? number : number + " \"" + std::string(name) + "\"";
}

using Action = std::variant<action::SendPartialUnload, action::SendDetach, action::Grant, action::Refuse, action::Note,
                            action::SendPartialRelease, action::AnswerStandIn, action::Deafness>;

}  // namespace comfy::arbiter
