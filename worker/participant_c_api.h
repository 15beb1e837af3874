#ifndef COMFY_PARTICIPANT_C_API_H
#define COMFY_PARTICIPANT_C_API_H
/* libcomfy_participant.so: the worker runtime behind a C ABI, for participants that are
 * not C++ (the ComfyUI host, from Python through ctypes). ctypes over a C ABI rather than
 * Boost.Python: one .so that any Python 3 (ComfyUI's own venv) loads without being built
 * against its ABI.
 *
 * Functions returning int give 0 on success and -1 on failure; then
 * comfy_participant_last_error() says in one line what happened (per thread). Any
 * function may be called from any thread: one thread may wait in
 * comfy_participant_next_command() while another waits for an admission; commands that
 * arrive during an admission wait are kept for the next comfy_participant_next_command(). */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COMFY_PARTICIPANT_API __attribute__((visibility("default")))

typedef struct comfy_participant comfy_participant;

/* The commands a participant takes, by their protocol message type. */
enum {
    COMFY_COMMAND_SHUTDOWN = 3,
    COMFY_COMMAND_PARTIAL_UNLOAD = 10,
    COMFY_COMMAND_DETACH = 11,
    COMFY_COMMAND_RELEASE_NODE_BOUNDARY = 13,
    COMFY_COMMAND_CAST_EPOCH_BOUNDARY = 14,
    COMFY_COMMAND_FULL_RELEASE = 15,
    COMFY_COMMAND_PARTIAL_RELEASE = 16,
    COMFY_COMMAND_RELEASE_PINS = 17
};

typedef struct {
    uint32_t type;         /* a COMFY_COMMAND_* */
    uint32_t node_index;   /* release_node_boundary */
    uint64_t correlation;  /* give it back in the receipt */
    uint64_t model_id;     /* partial_unload, detach */
    uint64_t bytes;        /* partial_unload, partial_release, release_pins: bytes asked */
    uint64_t prompt_epoch; /* release_node_boundary, cast_epoch_boundary */
    uint32_t reason;       /* full_release: 0 idle sweep, 1 operator, 2 /free, 3 shutdown */
    uint32_t grace_ms;     /* shutdown: exit within this */
} comfy_command;

typedef struct {
    int32_t granted;          /* 1: load; 0: refused */
    uint32_t vram_state;      /* upstream's VRAMState value */
    uint64_t device_free;     /* granted: free on the device when decided */
    uint64_t reserve_bytes;   /* granted: publish as upstream's EXTRA_RESERVED_VRAM */
    uint64_t shortfall;       /* granted short under policy "admit": bytes still missing */
    uint64_t needed_bytes;    /* refused: the admission target */
    uint64_t held_by_others;  /* refused: what the other participants hold */
    uint32_t refusal_reason;  /* refused: 0 no fit, 1 timed out, 2 shutting down */
    uint32_t reserved;
} comfy_admission_answer;

/* The census fields a participant keeps (its device use is kept by the library). */
typedef struct {
    uint64_t pinned_bytes;       /* TOTAL_PINNED_MEMORY */
    uint64_t pinned_ceiling;     /* MAX_PINNED_MEMORY */
    uint64_t bytes_evicted;
    uint64_t bytes_evicted_active;
    uint64_t churn;
    uint64_t allocator_reserved; /* e.g. torch.cuda.memory_reserved() */
    uint64_t allocator_active;   /* e.g. torch.cuda.memory_allocated() */
    uint64_t cast_buffer_bytes;
    uint64_t resident_set_bytes;
    uint64_t prompt_epoch;
    uint32_t last_node;
    uint32_t pin_errors;
} comfy_census;

/* Attaches from the COMFY_SV_* environment the supervisor set, says Hello and waits for
 * its answer. NULL on failure (see comfy_participant_last_error()). */
COMFY_PARTICIPANT_API comfy_participant* comfy_participant_open(uint64_t capabilities);
/* Capability bit: the participant joins before its start-up is done and says when it is
 * (comfy_participant_ready): the supervisor shows it spawning, and sends it no work,
 * until then. Without it a participant is ready once its Hello is answered. */
#define COMFY_CAP_READY_LATER ((uint64_t)1 << 3)
/* A participant with no node classes of its own, in comfy_participant_ready. */
#define COMFY_NODE_CLASSES_UNCOUNTED ((uint32_t)0xffffffff)
/* Its start-up is done (a pack imported): ready from now on, with how many node classes it
 * registered (the supervisor warns of a pack with none), or COMFY_NODE_CLASSES_UNCOUNTED.
 * Once, and only after opening with COMFY_CAP_READY_LATER; otherwise the supervisor stops
 * the process. */
COMFY_PARTICIPANT_API int comfy_participant_ready(comfy_participant* participant, uint32_t node_classes);
/* Stops the heartbeat and detaches; the handle is gone. NULL is ignored. */
COMFY_PARTICIPANT_API void comfy_participant_close(comfy_participant* participant);
/* The last failure on this thread, one line; "" when none. */
COMFY_PARTICIPANT_API const char* comfy_participant_last_error(void);

COMFY_PARTICIPANT_API uint32_t comfy_participant_slot(const comfy_participant* participant);
COMFY_PARTICIPANT_API uint32_t comfy_participant_generation(const comfy_participant* participant);

/* The ledger: model ids are the participant's own, non-zero and below 2^48. `name` is what
 * the operator reads for it (comfyctl, the dashboard, the log): ComfyUI's model class and
 * the file it came from, say; NULL or "" for none. Its first 63 bytes are sent, each byte
 * outside printable ASCII as '?'. */
COMFY_PARTICIPANT_API int comfy_participant_register_model(comfy_participant* participant, uint64_t model_id,
                                                           uint64_t weights_id, uint64_t total_bytes,
                                                           uint64_t loaded_bytes, uint32_t device, uint16_t kind,
                                                           int dynamic, const char* name);
/* `sequence` grows by one per report of a model (residency and unload receipts share it);
 * an older one is dropped by the supervisor. `just_used`: a load just used this model
 * (upstream's load_models_gpu), which moves it to the front of the eviction order. */
COMFY_PARTICIPANT_API int comfy_participant_report_residency(comfy_participant* participant, uint64_t model_id,
                                                             uint64_t sequence, uint64_t loaded_bytes,
                                                             uint32_t references, int currently_used, int just_used);
COMFY_PARTICIPANT_API int comfy_participant_drop_model(comfy_participant* participant, uint64_t model_id);

/* Asks leave to load `bytes` and blocks until a grant, a refusal or a shutdown (a refusal
 * with reason 2). `keep_loaded` lists this participant's own model ids to leave alone, any
 * number (the models of this load among them). Meanwhile the supervisor may ask this
 * participant to evict its own other models: another thread must take those commands
 * (comfy_participant_next_command) and answer them, or the admission waits for them. */
COMFY_PARTICIPANT_API int comfy_participant_request_admission(comfy_participant* participant, uint32_t device,
                                                              uint64_t bytes, uint64_t largest_tensor,
                                                              uint32_t streams, uint64_t pinned_bytes,
                                                              const uint64_t* keep_loaded, uint32_t keep_loaded_count,
                                                              uint32_t flags, comfy_admission_answer* answer);
/* Asks leave to pin `bytes` of host memory; *granted is what may be pinned (maybe 0). */
COMFY_PARTICIPANT_API int comfy_participant_request_pin(comfy_participant* participant, uint64_t bytes,
                                                        uint64_t* granted);

/* The sizes of the names in a ledger row, their NUL included. */
#define COMFY_MODEL_NAME_BYTES 64
#define COMFY_PACK_NAME_BYTES 32

/* One row of the machine-wide ledger (the supervisor's segment), as last written. */
typedef struct {
    uint32_t owner_slot;
    uint32_t owner_generation;
    uint64_t model_id;      /* the owner's own id */
    uint64_t weights_id;
    uint64_t total_bytes;
    uint64_t loaded_bytes;  /* UINT64_MAX when not reported yet */
    uint64_t load_order;    /* larger is more recent */
    uint32_t device;
    uint32_t references;
    uint16_t kind;
    uint8_t currently_used;
    uint8_t dynamic;
    uint32_t reserved;
    /* Printable ASCII, NUL-terminated, zero after the NUL. */
    char name[COMFY_MODEL_NAME_BYTES];        /* as its owner registered it; "" for none */
    char owner_name[COMFY_PACK_NAME_BYTES];   /* the owner's pack name; "" when not known */
} comfy_ledger_entry;

/* Every ledger row of every participant (this one's included), most recently loaded
 * first; rows being rewritten or not valid are left out. *count is how many there are,
 * of which at most `capacity` are written to `entries`. The rows are read from the
 * segment and sorted again only when the ledger's generation moved since the last call. */
COMFY_PARTICIPANT_API int comfy_participant_read_ledger(comfy_participant* participant, comfy_ledger_entry* entries,
                                                        uint32_t capacity, uint32_t* count);
/* The ledger's generation: the supervisor adds one each time it changes the ledger. Equal
 * to a value read before, no row changed since, and a caller may skip reading it again.
 * One load of shared memory; no system call. */
COMFY_PARTICIPANT_API int comfy_participant_ledger_generation(comfy_participant* participant, uint64_t* generation);

/* What a stand-in unload came to. */
enum {
    COMFY_STANDIN_UNLOADED = 0,   /* the owner answered: bytes_freed as it measured them */
    COMFY_STANDIN_OWNER_GONE = 1, /* the owner died or dropped the model: nothing is loaded */
    COMFY_STANDIN_DEFERRED = 2,   /* the owner is busy and unloads at its next boundary */
    COMFY_STANDIN_TIMED_OUT = 3,  /* no answer in time */
    COMFY_STANDIN_REFUSED = 4     /* not a model of another live participant */
};
typedef struct {
    uint64_t bytes_freed;   /* measured by the owner */
    uint64_t loaded_bytes;  /* still loaded after it; UINT64_MAX when not known */
    uint32_t outcome;       /* a COMFY_STANDIN_* */
    uint32_t reserved;
} comfy_standin_result;

/* The host only: upstream's eviction asked the stand-in of another participant's model
 * (a ledger row) to free `bytes` of it, or all of it when `detach` is non-zero (then
 * `bytes` is ignored). Blocks until the owner's answer, or `timeout_ms`. */
COMFY_PARTICIPANT_API int comfy_participant_unload_standin(comfy_participant* participant, uint32_t owner_slot,
                                                           uint32_t owner_generation, uint64_t model_id,
                                                           uint64_t bytes, int detach, uint32_t timeout_ms,
                                                           comfy_standin_result* result);

/* Busy from node_started to node_finished: evictions meanwhile are deferred. callback_started
   is node_started for a busy stretch that serves the peer's use of this participant's objects
   (a pack's function that ComfyUI calls back), shown so by comfyctl; node_finished ends it. */
COMFY_PARTICIPANT_API int comfy_participant_node_started(comfy_participant* participant, uint64_t prompt_epoch,
                                                         uint32_t node_index);
COMFY_PARTICIPANT_API int comfy_participant_callback_started(comfy_participant* participant, uint64_t prompt_epoch);
COMFY_PARTICIPANT_API int comfy_participant_node_finished(comfy_participant* participant, uint64_t prompt_epoch,
                                                          uint32_t node_index, int ok);
COMFY_PARTICIPANT_API int comfy_participant_update_census(comfy_participant* participant,
                                                          const comfy_census* census);

/* 1 with *command filled, 0 when `timeout_ms` passed first, -1 on failure. */
COMFY_PARTICIPANT_API int comfy_participant_next_command(comfy_participant* participant, uint32_t timeout_ms,
                                                         comfy_command* command);
/* Answers partial_unload or detach with the bytes really freed, measured, and the bytes
 * of the model still loaded after it (0 after a detach) under the model's next residency
 * `sequence`: the ledger takes that figure, whichever of this and a residency report
 * comes first. */
COMFY_PARTICIPANT_API int comfy_participant_send_unload_receipt(comfy_participant* participant, uint64_t correlation,
                                                                uint64_t model_id, uint64_t bytes_requested,
                                                                uint64_t bytes_freed, uint64_t sequence,
                                                                uint64_t loaded_bytes, int deferred);
/* Answers a release command (its COMFY_COMMAND_* type) with the bytes really freed. */
COMFY_PARTICIPANT_API int comfy_participant_send_release_receipt(comfy_participant* participant, uint64_t correlation,
                                                                 uint32_t release_type, uint64_t bytes_requested,
                                                                 uint64_t bytes_freed, int deferred);

/* The participant's device: the simulated device, or CUDA when COMFY_SV_CUDA_DEVICE is
 * set. allocate returns 1 when the bytes were reserved, 0 when they do not fit. */
COMFY_PARTICIPANT_API int comfy_participant_device_allocate(comfy_participant* participant, uint64_t bytes);
COMFY_PARTICIPANT_API int comfy_participant_device_release(comfy_participant* participant, uint64_t bytes);
/* *bytes: free on the whole device, every process's use counted. */
COMFY_PARTICIPANT_API int comfy_participant_device_free(comfy_participant* participant, uint64_t* bytes);
/* *bytes: what this process holds on the device. */
COMFY_PARTICIPANT_API int comfy_participant_device_used(comfy_participant* participant, uint64_t* bytes);

/* Watches a 32-bit word another process writes (the frames word of a bridge arena's
 * control page: how many frames the peer sent on its call sockets) for up to `spin_ns`:
 * 1 as soon as it differs from `seen`, 0 once the time ran out. No system call; the CPU
 * is told it spins. Needs no participant: Python calls it through ctypes, which lets go of
 * the GIL for the call, so that the process's other threads run while one watches. */
COMFY_PARTICIPANT_API int comfy_participant_watch_word(const uint32_t* word, uint32_t seen, uint64_t spin_ns);

#ifdef __cplusplus
}
#endif

#endif
