// The C ABI over WorkerRuntime. No exception crosses it: each call catches, keeps the
// message for comfy_participant_last_error() and returns -1.
#include "worker/participant_c_api.h"

#include "ipc/spsc_ring.hpp"
#include "worker/ledger_mirror.hpp"
#include "worker/worker_runtime.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

struct comfy_participant {
    explicit comfy_participant(std::uint64_t capabilities)
        : runtime(comfy::worker::WorkerEnvironment::from_process_environment(), capabilities),
          ledger(runtime.segment()) {}

    comfy::worker::WorkerRuntime runtime;
    comfy::worker::LedgerMirror ledger;  // guarded by ledger_mutex: any thread may read the ledger
    std::mutex ledger_mutex;
    // Process-local: the census record is one local copy that several threads edit (the
    // simulated device keeps its accounting in it too) before publishing it whole.
    std::mutex census_mutex;
};

namespace {

using namespace comfy;

static_assert(COMFY_COMMAND_SHUTDOWN == static_cast<int>(MessageType::shutdown));
static_assert(COMFY_COMMAND_PARTIAL_UNLOAD == static_cast<int>(MessageType::partial_unload));
static_assert(COMFY_COMMAND_DETACH == static_cast<int>(MessageType::detach));
static_assert(COMFY_COMMAND_RELEASE_NODE_BOUNDARY == static_cast<int>(MessageType::release_node_boundary));
static_assert(COMFY_COMMAND_CAST_EPOCH_BOUNDARY == static_cast<int>(MessageType::cast_epoch_boundary));
static_assert(COMFY_COMMAND_FULL_RELEASE == static_cast<int>(MessageType::full_release));
static_assert(COMFY_COMMAND_PARTIAL_RELEASE == static_cast<int>(MessageType::partial_release));
static_assert(COMFY_COMMAND_RELEASE_PINS == static_cast<int>(MessageType::release_pins));
static_assert(COMFY_CAP_READY_LATER == kCapReadyLater);
static_assert(COMFY_NODE_CLASSES_UNCOUNTED == kNodeClassesUncounted);
static_assert(COMFY_MODEL_NAME_BYTES == kModelNameBytes);
static_assert(COMFY_PACK_NAME_BYTES == kPackNameBytes);

thread_local std::string last_error;

// Keeps the exception being handled as this thread's last error, on one line.
void remember_failure(const char* unknown) {
    try {
        throw;
    } catch (const std::exception& e) {
        last_error = e.what();
    } catch (...) {
        last_error = unknown;
    }
    std::replace(last_error.begin(), last_error.end(), '\n', ' ');
}

// Runs `call`, turning an exception into -1 and a line for comfy_participant_last_error().
template <class Call>
int guarded(comfy_participant* participant, Call call) {
    if (participant == nullptr) {
        last_error = "no participant: comfy_participant_open() failed or the handle was closed";
        return -1;
    }
    try {
        return call(*participant);
    } catch (...) {
        remember_failure("unknown failure in the participant library");
    }
    return -1;
}

// Sends `payload` after checking it as the supervisor will: a field it would refuse
// would get this process stopped, so it is an error here instead.
template <class Payload>
MessageSlot checked(const comfy_participant& participant, const Payload& payload, std::uint64_t correlation = 0) {
    const MessageSlot slot = encode(payload, participant.runtime.generation(), correlation);
    if (const auto decoded = decode(slot); !decoded.ok()) {
        throw std::invalid_argument(std::string("invalid ") + std::string(to_string(Payload::kType)) + ": " +
                                    decoded.describe());
    }
    return slot;
}

template <class Payload>
int send_checked(comfy_participant& participant, const Payload& payload, std::uint64_t correlation = 0) {
    participant.runtime.send(checked(participant, payload, correlation));
    return 0;
}

void publish_census(comfy_participant& participant) {
    auto& census = participant.runtime.census();
    census.edit().device_used_bytes = participant.runtime.device().used_by_this_process();
    census.publish();
}

comfy_command to_command(const Message& message) {
    comfy_command command{};
    command.type = message.header.type;
    command.correlation = message.header.correlation;
    std::visit(
        [&command](const auto& payload) {
            using P = std::decay_t<decltype(payload)>;
            if constexpr (std::is_same_v<P, PartialUnload>) {
                command.model_id = payload.model_id;
                command.bytes = payload.bytes;
            } else if constexpr (std::is_same_v<P, Detach>) {
                command.model_id = payload.model_id;
            } else if constexpr (std::is_same_v<P, ReleaseNodeBoundary>) {
                command.prompt_epoch = payload.prompt_epoch;
                command.node_index = payload.node_index;
            } else if constexpr (std::is_same_v<P, CastEpochBoundary>) {
                command.prompt_epoch = payload.prompt_epoch;
            } else if constexpr (std::is_same_v<P, FullRelease>) {
                command.reason = payload.reason;
            } else if constexpr (std::is_same_v<P, PartialRelease> || std::is_same_v<P, ReleasePins>) {
                command.bytes = payload.bytes;
            } else if constexpr (std::is_same_v<P, Shutdown>) {
                command.grace_ms = payload.grace_ms;
            }
        },
        message.payload);
    return command;
}

bool is_participant_command(MessageType type) {
    return type == MessageType::shutdown || type == MessageType::partial_unload || type == MessageType::detach ||
           is_release(type);
}

}  // namespace

extern "C" {

comfy_participant* comfy_participant_open(uint64_t capabilities) {
    try {
        last_error.clear();
        return new comfy_participant(capabilities);
    } catch (...) {
        remember_failure("unknown failure attaching to the supervisor");
    }
    return nullptr;
}

void comfy_participant_close(comfy_participant* participant) { delete participant; }

const char* comfy_participant_last_error(void) { return last_error.c_str(); }

uint32_t comfy_participant_slot(const comfy_participant* participant) {
    return participant == nullptr ? 0 : participant->runtime.slot();
}

uint32_t comfy_participant_generation(const comfy_participant* participant) {
    return participant == nullptr ? 0 : participant->runtime.generation();
}

int comfy_participant_ready(comfy_participant* participant, uint32_t node_classes) {
    return guarded(participant, [&](comfy_participant& p) { return send_checked(p, Ready{node_classes, 0}); });
}

int comfy_participant_register_model(comfy_participant* participant, uint64_t model_id, uint64_t weights_id,
                                     uint64_t total_bytes, uint64_t loaded_bytes, uint32_t device, uint16_t kind,
                                     int dynamic, const char* name) {
    return guarded(participant, [&](comfy_participant& p) {
        ModelRegistered report{model_id, weights_id, total_bytes, loaded_bytes, device, kind,
                               static_cast<std::uint8_t>(dynamic != 0), 0, {}};
        set_name(report.name, name == nullptr ? "" : name);
        return send_checked(p, report);
    });
}

int comfy_participant_report_residency(comfy_participant* participant, uint64_t model_id, uint64_t sequence,
                                       uint64_t loaded_bytes, uint32_t references, int currently_used, int just_used) {
    return guarded(participant, [&](comfy_participant& p) {
        return send_checked(p, ResidencyReceipt{model_id, sequence, loaded_bytes, references,
                                                static_cast<std::uint8_t>(currently_used != 0),
                                                static_cast<std::uint8_t>(just_used != 0), {}});
    });
}

int comfy_participant_drop_model(comfy_participant* participant, uint64_t model_id) {
    return guarded(participant, [&](comfy_participant& p) { return send_checked(p, ModelDropped{model_id}); });
}

int comfy_participant_request_admission(comfy_participant* participant, uint32_t device, uint64_t bytes,
                                        uint64_t largest_tensor, uint32_t streams, uint64_t pinned_bytes,
                                        const uint64_t* keep_loaded, uint32_t keep_loaded_count, uint32_t flags,
                                        comfy_admission_answer* answer) {
    return guarded(participant, [&](comfy_participant& p) {
        if (answer == nullptr) throw std::invalid_argument("request_admission needs somewhere to put the answer");
        if (keep_loaded_count > 0 && keep_loaded == nullptr) {
            throw std::invalid_argument("keep_loaded is NULL with a count of " + std::to_string(keep_loaded_count));
        }
        AdmissionRequest request{};
        request.device = device;
        request.streams = streams;
        request.bytes = bytes;
        request.largest_tensor = largest_tensor;
        request.pinned_bytes = pinned_bytes;
        request.flags = flags;
        checked(p, request);
        // The supervisor names models across the machine by owner slot and id.
        std::vector<std::uint64_t> keys;
        for (std::uint32_t i = 0; i < keep_loaded_count; ++i) {
            if (keep_loaded[i] == 0 || keep_loaded[i] >= kModelIdLimit) {
                throw std::invalid_argument("keep_loaded[" + std::to_string(i) + "] is " + std::to_string(keep_loaded[i]) +
                                            ", not a model id (1 to 2^48 - 1)");
            }
            keys.push_back(machine_model_key(p.runtime.slot(), keep_loaded[i]));
        }
        const auto reply = p.runtime.request_admission(request, keys);
        *answer = comfy_admission_answer{};
        answer->granted = reply.granted ? 1 : 0;
        answer->vram_state = reply.grant.vram_state;
        answer->device_free = reply.grant.device_free;
        answer->reserve_bytes = reply.grant.reserve_bytes;
        answer->shortfall = reply.grant.shortfall;
        answer->needed_bytes = reply.refusal.needed_bytes;
        answer->held_by_others = reply.refusal.held_by_others;
        answer->refusal_reason = reply.refusal.reason;
        return 0;
    });
}

int comfy_participant_read_ledger(comfy_participant* participant, comfy_ledger_entry* entries, uint32_t capacity,
                                  uint32_t* count) {
    return guarded(participant, [&](comfy_participant& p) {
        if (count == nullptr || (entries == nullptr && capacity > 0)) {
            throw std::invalid_argument("read_ledger needs somewhere to put the entries and their count");
        }
        const std::lock_guard lock(p.ledger_mutex);
        const std::vector<LedgerRecord>& rows = p.ledger.rows();  // read again only if it changed
        *count = static_cast<uint32_t>(rows.size());
        std::transform(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(rows.size(), capacity)),
                       entries, [&](const LedgerRecord& r) {
                           comfy_ledger_entry entry{r.owner_slot, r.owner_generation, r.model_id, r.weights_id,
                                                    r.total_bytes, r.loaded_bytes, r.load_order, r.device,
                                                    r.references, r.kind, r.currently_used, r.dynamic, 0, {}, {}};
                           // Both names were validated when read (LedgerMirror): printable, ended by a NUL.
                           set_name(entry.name, name_in(r.name));
                           set_name(entry.owner_name, p.ledger.owner_name(r));
                           return entry;
                       });
        return 0;
    });
}

int comfy_participant_ledger_generation(comfy_participant* participant, uint64_t* generation) {
    return guarded(participant, [&](comfy_participant& p) {
        if (generation == nullptr) throw std::invalid_argument("ledger_generation needs somewhere to put the figure");
        *generation = p.ledger.generation();
        return 0;
    });
}

int comfy_participant_unload_standin(comfy_participant* participant, uint32_t owner_slot, uint32_t owner_generation,
                                     uint64_t model_id, uint64_t bytes, int detach, uint32_t timeout_ms,
                                     comfy_standin_result* result) {
    return guarded(participant, [&](comfy_participant& p) {
        if (result == nullptr) throw std::invalid_argument("unload_standin needs somewhere to put the result");
        StandInUnload request{};
        request.owner_slot = owner_slot;
        request.owner_generation = owner_generation;
        request.model_id = model_id;
        request.detach = static_cast<std::uint8_t>(detach != 0);
        request.bytes = detach != 0 ? 0 : bytes;
        checked(p, request);  // a field the supervisor would refuse is an error here, not a stop
        const StandInResult answer = p.runtime.unload_standin(request, std::chrono::milliseconds(timeout_ms));
        *result = {answer.bytes_freed, answer.loaded_bytes, answer.outcome, 0};
        return 0;
    });
}

int comfy_participant_request_pin(comfy_participant* participant, uint64_t bytes, uint64_t* granted) {
    return guarded(participant, [&](comfy_participant& p) {
        if (granted == nullptr) throw std::invalid_argument("request_pin needs somewhere to put the bytes granted");
        if (bytes > kMaxBytes) throw std::invalid_argument("a pin of more than 1 PiB is not a real figure");
        *granted = p.runtime.request_pin(bytes);
        return 0;
    });
}

int comfy_participant_node_started(comfy_participant* participant, uint64_t prompt_epoch, uint32_t node_index) {
    return guarded(participant,
                   [&](comfy_participant& p) { return send_checked(p, NodeStarted{prompt_epoch, node_index, 0}); });
}

int comfy_participant_callback_started(comfy_participant* participant, uint64_t prompt_epoch) {
    return guarded(participant, [&](comfy_participant& p) {
        return send_checked(p, NodeStarted{prompt_epoch, 0, static_cast<std::uint32_t>(NodeActivity::callback)});
    });
}

int comfy_participant_node_finished(comfy_participant* participant, uint64_t prompt_epoch, uint32_t node_index,
                                    int ok) {
    return guarded(participant, [&](comfy_participant& p) {
        const auto status = static_cast<std::uint32_t>(ok != 0 ? WorkStatus::ok : WorkStatus::failed);
        return send_checked(p, NodeFinished{prompt_epoch, node_index, status});
    });
}

int comfy_participant_update_census(comfy_participant* participant, const comfy_census* census) {
    return guarded(participant, [&](comfy_participant& p) {
        if (census == nullptr) throw std::invalid_argument("update_census needs the census fields");
        const std::lock_guard lock(p.census_mutex);
        auto& record = p.runtime.census().edit();
        record.pinned_bytes = census->pinned_bytes;
        record.pinned_ceiling = census->pinned_ceiling;
        record.bytes_evicted = census->bytes_evicted;
        record.bytes_evicted_active = census->bytes_evicted_active;
        record.churn = census->churn;
        record.allocator_reserved = census->allocator_reserved;
        record.allocator_active = census->allocator_active;
        record.cast_buffer_bytes = census->cast_buffer_bytes;
        record.resident_set_bytes = census->resident_set_bytes;
        record.prompt_epoch = census->prompt_epoch;
        record.last_node = census->last_node;
        record.pin_errors = census->pin_errors;
        publish_census(p);
        return 0;
    });
}

int comfy_participant_next_command(comfy_participant* participant, uint32_t timeout_ms, comfy_command* command) {
    return guarded(participant, [&](comfy_participant& p) {
        if (command == nullptr) throw std::invalid_argument("next_command needs somewhere to put the command");
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        for (;;) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            const auto message = p.runtime.next_command(std::max(left, std::chrono::milliseconds(0)));
            if (!message) return 0;
            // Work requests go to packs' workers only; nothing else reaches a participant.
            if (!is_participant_command(message->type())) continue;
            *command = to_command(*message);
            return 1;
        }
    });
}

int comfy_participant_send_unload_receipt(comfy_participant* participant, uint64_t correlation, uint64_t model_id,
                                          uint64_t bytes_requested, uint64_t bytes_freed, uint64_t sequence,
                                          uint64_t loaded_bytes, int deferred) {
    return guarded(participant, [&](comfy_participant& p) {
        return send_checked(p,
                            UnloadReceipt{model_id, bytes_requested, bytes_freed, sequence, loaded_bytes,
                                          static_cast<std::uint8_t>(deferred != 0), {}},
                            correlation);
    });
}

int comfy_participant_send_release_receipt(comfy_participant* participant, uint64_t correlation, uint32_t release_type,
                                           uint64_t bytes_requested, uint64_t bytes_freed, int deferred) {
    return guarded(participant, [&](comfy_participant& p) {
        ReleaseReceipt receipt{};
        receipt.release_type = static_cast<std::uint16_t>(release_type);
        receipt.deferred = static_cast<std::uint8_t>(deferred != 0);
        receipt.bytes_requested = bytes_requested;
        receipt.bytes_freed = bytes_freed;
        return send_checked(p, receipt, correlation);
    });
}

int comfy_participant_device_allocate(comfy_participant* participant, uint64_t bytes) {
    return guarded(participant, [&](comfy_participant& p) {
        const std::lock_guard lock(p.census_mutex);
        if (!p.runtime.device().allocate(bytes)) return 0;
        publish_census(p);
        return 1;
    });
}

int comfy_participant_device_release(comfy_participant* participant, uint64_t bytes) {
    return guarded(participant, [&](comfy_participant& p) {
        const std::lock_guard lock(p.census_mutex);
        p.runtime.device().release(bytes);
        publish_census(p);
        return 0;
    });
}

int comfy_participant_device_free(comfy_participant* participant, uint64_t* bytes) {
    return guarded(participant, [&](comfy_participant& p) {
        if (bytes == nullptr) throw std::invalid_argument("device_free needs somewhere to put the figure");
        *bytes = p.runtime.device().free_bytes();
        return 0;
    });
}

int comfy_participant_device_used(comfy_participant* participant, uint64_t* bytes) {
    return guarded(participant, [&](comfy_participant& p) {
        if (bytes == nullptr) throw std::invalid_argument("device_used needs somewhere to put the figure");
        const std::lock_guard lock(p.census_mutex);
        *bytes = p.runtime.device().used_by_this_process();
        return 0;
    });
}

int comfy_participant_watch_word(const uint32_t* word, uint32_t seen, uint64_t spin_ns) {
    if (word == nullptr) return 0;
    // A word in memory another process writes, one aligned 4-byte store per frame: only
    // loaded here. Acquire: the frame it counts was whole in the socket before the store.
    const std::atomic_ref<std::uint32_t> frames(*const_cast<std::uint32_t*>(word));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(spin_ns);
    constexpr int kChecksPerClockRead = 64;  // a clock read costs tens of loads
    while (true) {
        for (int check = 0; check < kChecksPerClockRead; ++check) {
            if (frames.load(std::memory_order_acquire) != seen) return 1;
            comfy::ipc::cpu_relax();
        }
        if (std::chrono::steady_clock::now() >= deadline) return 0;
    }
}

}  // extern "C"
