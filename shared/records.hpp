#pragma once
// The records kept in the segment's tables. Each table has one writer (DESIGN rule 1):
// participant records and ledger entries are written by the supervisor, each census slot
// by its participant. Readers go through the seqlock and validate what they read.

#include <cstdint>

namespace comfy {

inline constexpr std::size_t kPackNameBytes = 32;

enum class ParticipantState : std::uint8_t { empty = 0, spawning, ready, busy, draining, dead, failed };
inline constexpr std::uint8_t kParticipantStateCount = 7;

enum class ParticipantKind : std::uint8_t { worker = 0, host };

// Supervisor-written: who occupies a slot and how it is doing.
struct ParticipantRecord {
    char name[kPackNameBytes];   // NUL-terminated pack name
    std::int32_t pid;
    std::uint32_t generation;    // new at every start; 0 for an empty slot
    std::uint8_t state;          // a ParticipantState
    std::uint8_t kind;           // a ParticipantKind
    std::uint16_t reserved;
    std::uint32_t restarts;
    std::int32_t last_exit_status;  // -1 when unknown or killed by a signal
    std::int32_t last_exit_signal;  // 0 when it exited on its own
    std::uint64_t started_at_ms;    // wall clock, for display only
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

}  // namespace comfy
