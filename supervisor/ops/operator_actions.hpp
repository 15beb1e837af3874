#pragma once
// The operator's actions, as the control socket takes them from comfyctl: restart, stop,
// start and release one pack, named as in the config ("host" for ComfyUI); free and retry
// for all; and the figures comfyctl top needs beyond the segment. Each answers at once, in
// one line. A life an operator stopped or restarted is settled here when it ends.

#include "supervisor/lifecycle/worker_access.hpp"
#include "supervisor/memory/release_scheduler.hpp"
#include "supervisor/ops/control_server.hpp"

#include <cstddef>
#include <optional>
#include <string>

namespace comfy::supervisor {

class OperatorActions {
public:
    // What `info` reports beyond the segment.
    struct Figures {
        Bytes reserve_bytes = 0;
        Bytes device_total_bytes = 0;
    };
    OperatorActions(WorkerAccess& lives, ReleaseScheduler& releases, Figures figures);

    // The control socket's handlers, each calling the action below.
    ControlHandlers handlers();

    // restart: stops the worker and starts it again at once, not counted as a crash.
    ActionAnswer restart(const std::string& name);
    // stop: stops it and keeps it in state stopped; its requests fail at once.
    ActionAnswer stop(const std::string& name);
    // start: starts a stopped or failed pack, its past deaths forgotten by the restart limit.
    ActionAnswer start(const std::string& name);
    // release: a full release, or with `pins` a release_pins of that many bytes.
    ActionAnswer release(const std::string& name, std::optional<Bytes> pins);
    // Starts every failed pack again, its past deaths forgotten (comfyctl retry, SIGHUP);
    // returns how many there were.
    std::size_t retry_failed();

    // Called when a life ended that an operator stopped or restarted: keeps it stopped or
    // starts it again at once; false when no operator asked.
    bool after_exit(WorkerProcess& worker);

private:
    WorkerProcess* pack_named(const std::string& name);
    ActionAnswer unknown_pack(const std::string& name);

    WorkerAccess& lives_;
    ReleaseScheduler& releases_;
    Figures figures_;
};

}  // namespace comfy::supervisor
