#pragma once
// Room ctl/: comfyctl, and what the daemon shares with it: the segment's reports and their
// formats, the control protocol and the socket's path.
//
// Reads the supervisor's segment into plain structs for comfyctl. Shared memory is input,
// not truth: every field is validated on the way in. The segment is mapped read-only and
// only seqlock reads are used; no read waits on the supervisor (a record that stays
// mid-write, as when the supervisor is stopped inside a write, is reported busy after
// bounded retries). Censuses are the supervisor's reports of them: a participant's own
// region is mapped by that participant and the supervisor alone.

#include "shared/records.hpp"
#include "shared/segment_layout.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace comfy::ctl {

// How a census read went: whole and current, whole but from another generation, or
// mid-write on every try here (busy); or as the supervisor reported it: not written yet
// (unread), or not believable (unreadable: mid-write there, or impossible figures).
enum class RecordStatus { ok, stale, busy, unread, unreadable };
const char* status_name(RecordStatus status) noexcept;
// Whether a census row carries figures (ok or stale).
bool figures_known(RecordStatus status) noexcept;

struct WorkerRow {
    std::uint32_t slot = 0;
    bool busy = false;         // the record was being written on every try; nothing below is known
    std::string name;          // printable ASCII; '?' replaces bad bytes and ends a name without NUL
    bool name_valid = true;
    std::string kind;          // "worker", "host" or "invalid(N)"
    std::string state;         // "empty", "spawning" ... "failed" or "invalid(N)"
    bool deaf = false;         // the arbiter passes it over until it answers (kParticipantDeaf)
    bool live = false;         // spawning, ready, busy or draining
    std::int32_t pid = 0;
    std::uint32_t generation = 0;
    std::uint32_t restarts = 0;
    std::int32_t last_exit_status = -1;
    std::int32_t last_exit_signal = 0;
    std::uint64_t started_at_ms = 0;  // its life's start, ms since the Unix epoch
    std::string last_node;            // by name, when the supervisor sent it; as `name`, empty when none
    // While busy: since when (ms since the Unix epoch), and whether serving the host's use of
    // its objects (a pack's function that ComfyUI calls back) rather than a node of its own.
    std::uint64_t busy_since_ms = 0;
    bool in_callback = false;
    // The node classes its life registered (a pack's worker, once ready); absent when it has
    // not counted them (starting, the host, a command pack).
    std::optional<std::uint32_t> node_classes;
    // Why it failed, or a warning while it runs ("warning: ..."); printable as `name`, empty
    // when there is nothing to say.
    std::string note;
};

struct CensusRow {
    std::uint32_t slot = 0;
    bool participant_busy = false; // the participant record was busy: name and generation unknown
    std::string name;              // the participant's, as in WorkerRow
    std::uint32_t generation = 0;  // the participant's
    RecordStatus status = RecordStatus::busy;
    CensusRecord census{};         // as read; all zero unless figures_known(status)
    std::uint64_t heartbeat = 0;   // as the supervisor last saw it
};

// One model in the machine-wide ledger: who holds it and how much of it is on the device.
struct LedgerRow {
    std::uint32_t row = 0;     // its place in the segment's table
    bool busy = false;         // mid-write on every try; nothing below is known
    bool valid = true;         // false when a field holds a value no entry can hold
    std::uint32_t owner_slot = 0;
    std::string owner = "?";   // the owner's pack name, or "?" when its slot is not a live participant
    std::uint32_t owner_generation = 0;
    std::uint64_t model_id = 0;
    std::string name;          // as its owner reported it, printable as for WorkerRow::name; may be empty
    std::uint32_t device = 0;
    std::uint64_t total_bytes = 0;
    std::optional<std::uint64_t> loaded_bytes;  // absent: not reported yet (never read as 0)
    std::uint32_t references = 0;
    bool currently_used = false;
    bool dynamic = false;
    std::uint64_t load_order = 0;  // larger is more recent
};

struct DeviceSummary {
    std::uint64_t total_bytes = 0;  // the simulated device's size; 0 for a real device
    // device_used_bytes summed by the rule in shared/device_accounting.hpp (live
    // participants whose census is current), saturating, over the censuses known: a busy
    // or unreadable one adds nothing here.
    std::uint64_t used_bytes = 0;
    // total - used (never below 0); absent for a real device, whose size is not in the segment.
    std::optional<std::uint64_t> free_bytes;
};

struct SegmentReport {
    std::string instance;
    std::string segment;
    std::int32_t supervisor_pid = 0;
    std::uint32_t participant_slots = 0;
    std::vector<WorkerRow> workers;  // non-empty slots only, in slot order
    std::vector<CensusRow> census;   // the same slots
    std::vector<LedgerRow> ledger;   // entries in use, most recently loaded first
    DeviceSummary device;
};

// Bounds on how long one record is retried before it is reported busy.
struct ReadPolicy {
    int tries_per_round = ipc::Seqlock<ParticipantRecord>::kDefaultTries;
    int rounds = 3;
    std::chrono::microseconds pause_between_rounds{500};
};

// Reads every participant slot of an attached segment (see attach_segment). Throws
// ipc::SegmentError when the segment's layout header does not match.
SegmentReport read_report(const std::string& instance, const ipc::SharedSegment& segment,
                          const ReadPolicy& policy = {});

// The pieces of read_report, for tests.
bool slot_in_use(const ParticipantRecord& record) noexcept;
WorkerRow worker_row(std::uint32_t slot, const ParticipantRecord& record);
// A name field of another process's (a pack's, a model's) as printable ASCII: '?' for each
// bad byte, and a '?' that ends a name with no NUL; `valid` false when either was needed.
std::string display_name(std::span<const char> raw, bool& valid);
std::string state_name(std::uint8_t state);
std::string kind_name(std::uint8_t kind);

}  // namespace comfy::ctl
