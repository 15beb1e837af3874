#pragma once
// The records kept in shared memory. Each has one writer: participant records, census
// reports and ledger entries are written by the supervisor in its segment, each census by
// its participant in its own region. Readers go through the seqlock and validate what
// they read.

#include "shared/name_field.hpp"

#include <cstdint>

namespace comfy {

inline constexpr std::size_t kPackNameBytes = 32;
inline constexpr std::size_t kNodeNameBytes = 64;
inline constexpr std::size_t kParticipantNoteBytes = 512;
// A participant's node classes when it has not counted them: not ready yet, or one with no
// nodes of its own (the host, a command pack). Any other value is a pack worker's count.
inline constexpr std::uint32_t kNodeClassesUncounted = 0xffffffff;

// stopped: by an operator (comfyctl stop), until one starts it again; added last, so the
// numbers of the others, and the layout, are unchanged.
enum class ParticipantState : std::uint8_t { empty = 0, spawning, ready, busy, draining, dead, failed, stopped };
inline constexpr std::uint8_t kParticipantStateCount = 8;

enum class ParticipantKind : std::uint8_t { worker = 0, host };

// ParticipantRecord::flags. deaf: it let a command go unanswered past the answer time-out,
// and the arbiter passes it over until it answers (docs/ARBITRATION.md). in_callback: busy
// serving the host's use of its objects (a pack's function that ComfyUI calls back), not
// a node call of its own. The other bits are written zero; a reader ignores them, so a
// later flag does not make an older reader refuse the record.
inline constexpr std::uint16_t kParticipantDeaf = 1;
inline constexpr std::uint16_t kParticipantInCallback = 2;

// Supervisor-written: who occupies a slot and how it is doing.
struct ParticipantRecord {
    char name[kPackNameBytes];   // NUL-terminated pack name
    std::int32_t pid;
    std::uint32_t generation;    // new at every start; 0 for an empty slot
    std::uint8_t state;          // a ParticipantState
    std::uint8_t kind;           // a ParticipantKind
    std::uint16_t flags;         // kParticipantDeaf, kParticipantInCallback
    std::uint32_t restarts;
    std::int32_t last_exit_status;  // -1 when unknown or killed by a signal
    std::int32_t last_exit_signal;  // 0 when it exited on its own
    std::uint64_t started_at_ms;    // its life's start, wall clock (ms since the Unix epoch), for display only
    // The node it started last, by name, when the supervisor sent it that node (a workload's
    // nodes); empty for one it was not told of (ComfyUI's own, called by the host).
    char last_node[kNodeNameBytes];  // NUL-terminated printable ASCII
    // When its busy stretch (a node, or a callback) began, wall clock (ms since the Unix
    // epoch), for display only; 0 while it is not busy.
    std::uint64_t busy_since_ms;
    // How many node classes this life registered, as its `ready` said; kNodeClassesUncounted
    // otherwise.
    std::uint32_t node_classes;
    std::uint32_t reserved;  // zero
    // Why it failed, with what to do (state failed); or, while it runs, what an operator
    // should look at (a pack that registered no node class). NUL-terminated printable
    // ASCII, cut to fit; empty when there is nothing to say.
    char note[kParticipantNoteBytes];
};

// Supervisor-written: one stand-in entry per model held on a device (the machine-wide
// current_loaded_models). Front of the load order is the most recently loaded.
struct LedgerRecord {
    std::uint64_t model_id;
    std::uint64_t weights_id;
    std::uint64_t total_bytes;
    std::uint64_t loaded_bytes;   // kUnknownBytes when not reported yet
    std::uint64_t load_order;     // larger is more recent
    std::uint64_t last_sequence;  // of the residency receipt applied last
    std::uint32_t owner_slot;
    std::uint32_t owner_generation;  // 0 when the entry is free
    std::uint32_t device;
    std::uint32_t references;
    std::uint16_t kind;            // a ModelKind
    std::uint8_t currently_used;   // 0 or 1
    std::uint8_t dynamic;          // 0 or 1
    std::uint32_t reserved;
    char name[kModelNameBytes];    // as its owner reported it (model_registered.name); may be empty
};

// Participant-written: what a participant holds that the ledger does not.
struct CensusRecord {
    std::uint32_t generation;       // the writer's generation; a mismatch means stale
    std::uint32_t pin_errors;
    std::uint64_t pinned_bytes;     // TOTAL_PINNED_MEMORY
    std::uint64_t pinned_ceiling;   // MAX_PINNED_MEMORY
    std::uint64_t bytes_evicted;
    std::uint64_t bytes_evicted_active;
    std::uint64_t churn;            // re-evictions within one prompt epoch
    std::uint64_t allocator_reserved;
    std::uint64_t allocator_active;
    std::uint64_t cast_buffer_bytes;
    std::uint64_t resident_set_bytes;
    std::uint64_t device_used_bytes;  // the participant's allocations on the device
    std::uint64_t prompt_epoch;
    std::uint32_t last_node;
    std::uint32_t reserved;
};

// How the supervisor judged a participant's census when it last read it.
enum class CensusStatus : std::uint8_t {
    unread = 0,   // no census read yet
    ok,           // whole, of the running generation, with figures a machine can have
    stale,        // whole, but of another generation
    unreadable,   // mid-write on every try, or figures no machine has: not believed
};
inline constexpr std::uint8_t kCensusStatusCount = 4;

// Supervisor-written: a participant's census as last read, its heartbeat count, and the
// judgement, for readers that cannot map the participant's own region (comfyctl).
struct CensusReport {
    CensusRecord census;            // as read; zero unless status is ok or stale
    std::uint64_t heartbeat;
    std::uint8_t status;            // a CensusStatus
    std::uint8_t reserved[7];
};

}  // namespace comfy
