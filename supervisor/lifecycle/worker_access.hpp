#pragma once
// What the supervisor's parts (memory arbitration, the release paths, the operator's
// actions) need of the participant table it keeps: the participants, a live life found by
// slot and generation, a message delivered to one, a life stopped, started or kept
// stopped, and a line about one, logged and kept in the journal. The Supervisor implements
// it; each part gets it at construction and never owns a participant.

#include "shared/message_codec.hpp"
#include "supervisor/lifecycle/worker_process.hpp"
#include "supervisor/ops/log/log.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace comfy::supervisor {

class WorkerAccess {
public:
    // Every participant, the ComfyUI host first when there is one, in slot order.
    virtual const std::vector<std::unique_ptr<WorkerProcess>>& workers() = 0;
    // The participant in `slot` if its live life is `generation`; null otherwise.
    virtual WorkerProcess* live(std::uint32_t slot, std::uint32_t generation) = 0;
    // Queues `message` on the worker's command ring (pushed now, or at its next turn).
    virtual void deliver(WorkerProcess& worker, const MessageSlot& message) = 0;
    // Stops a worker that broke the protocol; it is restarted as after a crash.
    virtual void terminate(WorkerProcess& worker, const std::string& reason) = 0;
    // Logs a line `worker` can make the supervisor write again and again: at most a few
    // per topic and window, then one line that says how many more were left out. `about`:
    // what the line is about, for the journal, when not `worker` itself (its pack empty):
    // the owner of a model a memory decision names, and the model.
    virtual void log_about(const WorkerProcess& worker, const std::string& topic, std::string line,
                           LogFields about = {}) = 0;
    // Logs `text` after the participant's name and records it in the event journal as `kind`.
    virtual void happened(LogLevel level, const WorkerProcess& worker, const char* kind, const std::string& text,
                          nlohmann::json figures = nlohmann::json::object()) = 0;
    // Whether shutdown has begun: no life starts then.
    virtual bool shutting_down() const noexcept = 0;
    // Starts a new life of `worker` now, under a new generation.
    virtual void start_worker(WorkerProcess& worker) = 0;
    // Keeps `worker`, whose life has ended, stopped until an operator starts it: what was
    // asked of it fails and the host hears that its nodes are gone.
    virtual void keep_stopped(WorkerProcess& worker) = 0;

protected:
    ~WorkerAccess() = default;
};

}  // namespace comfy::supervisor
