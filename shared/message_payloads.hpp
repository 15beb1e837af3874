#pragma once
// The typed payload of each message. Fixed-width fields only, explicit padding (always
// zero), trivially copyable, so the bytes in a ring slot are the struct.

#include "shared/message_header.hpp"
#include "shared/name_field.hpp"
#include "shared/records.hpp"  // kNodeNameBytes

#include <cstdint>
#include <limits>

namespace comfy {

// No device or host in this decade holds a petabyte: anything larger is corruption.
inline constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 50;
// A byte figure the sender does not know. Unknown is never read as zero.
inline constexpr std::uint64_t kUnknownBytes = std::numeric_limits<std::uint64_t>::max();
inline constexpr std::uint32_t kMaxDevices = 64;
inline constexpr std::uint32_t kMaxStreams = 64;
// Keys per admission_keep message: one full slot's payload.
inline constexpr std::uint32_t kKeepKeysPerMessage = 12;
inline constexpr std::uint32_t kMaxGraceMs = 10 * 60 * 1000;
inline constexpr std::size_t kTokenBytes = 32;

enum class ModelKind : std::uint16_t { unknown = 0, diffusion, text_encoder, vae, clip_vision, controlnet, other };
inline constexpr std::uint16_t kModelKindCount = 7;

// Upstream's VRAMState, as published in a grant.
enum class VramState : std::uint32_t { disabled = 0, no_vram, low_vram, normal_vram, high_vram, shared };
inline constexpr std::uint32_t kVramStateCount = 6;

enum class FullReleaseReason : std::uint32_t { idle_sweep = 0, operator_request, free_endpoint, shutdown };
inline constexpr std::uint32_t kFullReleaseReasonCount = 4;

enum class RefusalReason : std::uint32_t { no_fit = 0, timed_out, shutting_down };
inline constexpr std::uint32_t kRefusalReasonCount = 3;

enum class WorkStatus : std::uint32_t { ok = 0, failed };
inline constexpr std::uint32_t kWorkStatusCount = 2;

// worker_stopped: an operator stopped the pack (comfyctl stop); it fails at once until started.
enum class FailureReason : std::uint32_t { worker_died = 0, worker_failed, shutting_down, no_such_pack, worker_stopped };
inline constexpr std::uint32_t kFailureReasonCount = 5;

// Model ids are unique within their owner and stay below 2^48, so that a model can be
// named across the machine (in AdmissionRequest::keep_loaded) with its owner's slot on top.
inline constexpr unsigned kModelIdBits = 48;
inline constexpr std::uint64_t kModelIdLimit = std::uint64_t{1} << kModelIdBits;
constexpr std::uint64_t machine_model_key(std::uint32_t owner_slot, std::uint64_t model_id) {
    return (std::uint64_t{owner_slot} << kModelIdBits) | (model_id & (kModelIdLimit - 1));
}

// Capabilities a participant declares in Hello.
enum Capability : std::uint64_t {
    kCapNodeBoundaryRelease = 1u << 0,  // wants release_node_boundary after each node
    kCapPinnedMemory = 1u << 1,         // pins host memory and answers release_pins
    kCapPartialUnload = 1u << 2,        // can unload part of a model
    // Joins before its start-up is done (a Python pack's worker, before it imports the
    // pack, which may take longer than the supervisor waits for a Hello) and sends `ready`
    // once it is: spawning until then. Without it a participant is ready at its Hello.
    kCapReadyLater = 1u << 3,
};
inline constexpr std::uint64_t kKnownCapabilities =
    kCapNodeBoundaryRelease | kCapPinnedMemory | kCapPartialUnload | kCapReadyLater;

struct Hello {
    static constexpr MessageType kType = MessageType::hello;
    std::int32_t pid;
    std::uint32_t layout_version;
    std::uint64_t capabilities;
    std::uint8_t token[kTokenBytes];
};

struct HelloAck {
    static constexpr MessageType kType = MessageType::hello_ack;
    std::uint32_t slot;
    std::uint32_t generation;
    std::uint64_t reserve_bytes;
    std::uint64_t device_total_bytes;
};

struct Shutdown {
    static constexpr MessageType kType = MessageType::shutdown;
    std::uint32_t grace_ms;
    std::uint32_t reserved;
};

struct ModelRegistered {
    static constexpr MessageType kType = MessageType::model_registered;
    std::uint64_t model_id;      // non-zero, unique within the participant
    std::uint64_t weights_id;    // clones that share weights share this id
    std::uint64_t total_bytes;
    std::uint64_t loaded_bytes;  // kUnknownBytes when not known yet
    std::uint32_t device;
    std::uint16_t kind;          // a ModelKind
    std::uint8_t dynamic;        // 0 or 1
    std::uint8_t reserved;
    // What the operator reads for it (shared/name_field.hpp): ComfyUI's model class and the
    // file it came from, a reference worker's pack-file name, or empty when it has none.
    char name[kModelNameBytes]{};
};

struct ResidencyReceipt {
    static constexpr MessageType kType = MessageType::residency_receipt;
    std::uint64_t model_id;
    std::uint64_t sequence;      // per model, shared with unload_receipt; an older one is dropped
    std::uint64_t loaded_bytes;  // kUnknownBytes when not known
    std::uint32_t references;
    std::uint8_t currently_used; // 0 or 1
    // 0 or 1: a load just used this model (upstream's load_models_gpu re-inserts it at
    // index 0), so it moves to the front of the load order.
    std::uint8_t just_used;
    std::uint8_t reserved[2];
};

struct ModelDropped {
    static constexpr MessageType kType = MessageType::model_dropped;
    std::uint64_t model_id;
};

struct AdmissionRequest {
    static constexpr MessageType kType = MessageType::admission_request;
    std::uint32_t device;
    std::uint32_t streams;
    std::uint64_t bytes;
    std::uint64_t largest_tensor;
    std::uint64_t pinned_bytes;
    // How many models to leave alone (upstream's keep_loaded, the models of this load among
    // them), sent just before in admission_keep messages with the same correlation: a load
    // may keep any number of models, more than one slot holds.
    std::uint32_t keep_loaded_count;
    std::uint32_t flags;  // kAdmitForDynamic
};
// Part of an admission's keep_loaded list; its header carries the admission's correlation.
struct AdmissionKeep {
    static constexpr MessageType kType = MessageType::admission_keep;
    std::uint32_t count;  // 1..kKeepKeysPerMessage keys used
    std::uint32_t reserved;
    std::uint64_t keys[kKeepKeysPerMessage];  // machine_model_key()s; unused ones are zero
};

// The load is of dynamic models, which never evict one another (upstream's for_dynamic).
inline constexpr std::uint32_t kAdmitForDynamic = 1u << 0;

struct AdmissionGrant {
    static constexpr MessageType kType = MessageType::admission_grant;
    std::uint64_t device_free;
    std::uint64_t reserve_bytes;
    std::uint64_t shortfall;   // bytes still missing when granted under policy "admit"
    std::uint32_t vram_state;  // a VramState
    std::uint32_t reserved;
};

struct AdmissionRefused {
    static constexpr MessageType kType = MessageType::admission_refused;
    std::uint64_t needed_bytes;
    std::uint64_t device_free;
    std::uint64_t held_by_others;
    std::uint32_t reason;  // a RefusalReason
    std::uint32_t reserved;
};

struct PartialUnload {
    static constexpr MessageType kType = MessageType::partial_unload;
    std::uint64_t model_id;
    std::uint64_t bytes;
};

struct Detach {
    static constexpr MessageType kType = MessageType::detach;
    std::uint64_t model_id;
};

// The bytes freed answer the command; the model's figure after it (loaded_bytes, under the
// model's residency sequence) is what the ledger takes, so a residency_receipt sent before
// or after it never makes the freed bytes count twice.
struct UnloadReceipt {
    static constexpr MessageType kType = MessageType::unload_receipt;
    std::uint64_t model_id;
    std::uint64_t bytes_requested;
    std::uint64_t bytes_freed;   // measured
    std::uint64_t sequence;      // the model's residency sequence for loaded_bytes
    std::uint64_t loaded_bytes;  // still loaded after it (0 after a detach); kUnknownBytes when not known
    std::uint8_t deferred;       // 0 or 1: busy, runs at the next boundary (then nothing else counts)
    std::uint8_t reserved[7];
};

// Sent by the ComfyUI host only: upstream's own eviction (free_memory, unload_all_models)
// called partially_unload or detach on the stand-in entry of another participant's model.
// The supervisor sends the owner the matching partial_unload or detach and answers with
// the owner's receipt. `bytes` is what to free; 0 with `detach` set means the whole model.
struct StandInUnload {
    static constexpr MessageType kType = MessageType::standin_unload;
    std::uint32_t owner_slot;
    std::uint32_t owner_generation;
    std::uint64_t model_id;  // the owner's own id, as in the ledger
    std::uint64_t bytes;
    std::uint8_t detach;     // 0 or 1
    std::uint8_t reserved[7];
};

enum class StandInOutcome : std::uint32_t {
    unloaded = 0,  // the owner answered: bytes_freed as it measured them
    owner_gone,    // the owner died or the model left the ledger: nothing of it is loaded
    deferred,      // the owner is busy: it runs the unload at its next boundary
    timed_out,     // the owner did not answer within the arbiter's answer timeout
    refused,       // not a model of another live participant
};
inline constexpr std::uint32_t kStandInOutcomeCount = 5;

struct StandInResult {
    static constexpr MessageType kType = MessageType::standin_result;
    std::uint64_t model_id;
    std::uint64_t bytes_freed;   // measured by the owner; 0 unless unloaded
    std::uint64_t loaded_bytes;  // still loaded after it; kUnknownBytes when not known
    std::uint32_t outcome;       // a StandInOutcome
    std::uint32_t reserved;
};

struct ReleaseNodeBoundary {
    static constexpr MessageType kType = MessageType::release_node_boundary;
    std::uint64_t prompt_epoch;
    std::uint32_t node_index;
    std::uint32_t reserved;
};

struct CastEpochBoundary {
    static constexpr MessageType kType = MessageType::cast_epoch_boundary;
    std::uint64_t prompt_epoch;
};

struct FullRelease {
    static constexpr MessageType kType = MessageType::full_release;
    std::uint32_t reason;  // a FullReleaseReason
    std::uint32_t reserved;
};

struct PartialRelease {
    static constexpr MessageType kType = MessageType::partial_release;
    std::uint64_t bytes;
};

struct ReleasePins {
    static constexpr MessageType kType = MessageType::release_pins;
    std::uint64_t bytes;
};

struct ReleaseReceipt {
    static constexpr MessageType kType = MessageType::release_receipt;
    std::uint16_t release_type;  // the MessageType of the release it answers
    std::uint8_t deferred;       // 0 or 1
    std::uint8_t reserved[5];
    std::uint64_t bytes_requested;
    std::uint64_t bytes_freed;   // measured
};

struct PinRequest {
    static constexpr MessageType kType = MessageType::pin_request;
    std::uint64_t bytes;
};

struct PinGrant {
    static constexpr MessageType kType = MessageType::pin_grant;
    std::uint64_t bytes_granted;  // may be less than asked; 0 means do not pin
    std::uint64_t budget_left;
};

// What made a participant busy: a node of its own, or the peer's use of its objects (a
// pack's function that ComfyUI's host calls back, such as a CFG function under its sampler).
enum class NodeActivity : std::uint32_t { node = 0, callback = 1 };

struct NodeStarted {
    static constexpr MessageType kType = MessageType::node_started;
    std::uint64_t prompt_epoch;
    std::uint32_t node_index;
    std::uint32_t activity;  // a NodeActivity
};

struct NodeFinished {
    static constexpr MessageType kType = MessageType::node_finished;
    std::uint64_t prompt_epoch;
    std::uint32_t node_index;
    std::uint32_t status;  // a WorkStatus
};

struct WorkRequest {
    static constexpr MessageType kType = MessageType::work_request;
    std::uint64_t prompt_epoch;
    std::uint32_t node_index;
    std::uint32_t reserved;
    char node_name[kNodeNameBytes];  // NUL-terminated, printable ASCII
};

struct WorkResult {
    static constexpr MessageType kType = MessageType::work_result;
    std::uint64_t prompt_epoch;
    std::uint32_t node_index;
    std::uint32_t status;  // a WorkStatus
    std::uint64_t device_bytes_in_use;
};

struct RequestFailed {
    static constexpr MessageType kType = MessageType::request_failed;
    std::uint32_t reason;  // a FailureReason
    std::int32_t exit_status;  // -1 when the worker was killed by a signal
    std::int32_t signal;       // 0 when it exited
    std::uint32_t slot;
};

// The simulated device's allocations go through the supervisor, which keeps its one
// account (supervisor/memory/simulated_device_use.hpp), as a GPU's go through its driver.
struct DeviceAllocate {
    static constexpr MessageType kType = MessageType::device_allocate;
    std::uint64_t bytes;
};

struct DeviceAllocation {
    static constexpr MessageType kType = MessageType::device_allocation;
    std::uint8_t granted;  // 0 or 1
    std::uint8_t reserved[7];
};

struct DeviceRelease {
    static constexpr MessageType kType = MessageType::device_release;
    std::uint64_t bytes;
};

// Sent once, by a participant whose Hello declared kCapReadyLater, when its start-up
// succeeded (a pack's worker: the pack imported and its nodes described), with how many
// node classes it registered (kNodeClassesUncounted from one with no nodes of its own).
struct Ready {
    static constexpr MessageType kType = MessageType::ready;
    std::uint32_t node_classes;
    std::uint32_t reserved;  // zero
};

}  // namespace comfy
