#pragma once
// Room bridge/: node calls between the ComfyUI host and the packs' workers, as far as the
// supervisor takes part in them (descriptors, never the calls themselves).
//
// The supervisor's part in node calls between the ComfyUI host and the Python packs'
// workers (docs/ARCHITECTURE.md, "Node calls"): it makes each bridging life's control
// socket and each pack life's value arena, and whenever a host life and a pack life both
// exist it gives each a fresh call channel to the other, the host the pack's arena
// read-only, and both a fresh arena for what the host sends that pack life: writable to
// the host, read-only to that pack alone, so that no pack can map what the host sent
// another. It never reads the call traffic, nor maps an arena.

#include "ipc/arena.hpp"
#include "ipc/unique_fd.hpp"
#include "supervisor/bridge/host_requests.hpp"
#include "supervisor/lifecycle/worker_process.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace comfy::supervisor {

class BridgeBroker {
public:
    // Stops a participant with `reason` (the supervisor's terminate path).
    using Stop = std::function<void(WorkerProcess&, const std::string& reason)>;

    // `workers` is the supervisor's table, read to find the host, the Python packs and
    // their states; it outlives the broker, as do `host_requests`, which reads each host
    // life's control socket.
    BridgeBroker(const std::vector<std::unique_ptr<WorkerProcess>>& workers, Stop stop, HostRequests& host_requests);

    // What a bridging life inherits: its end of the control socket and, for a pack, its
    // arena, writable (the host writes one arena per pack life, handed over at pairing).
    struct ChildEnds {
        ipc::UniqueFd control;
        ipc::UniqueFd arena;  // none for the host
        std::uint64_t arena_bytes = 0;
    };

    // Opens the life `worker` is about to start (its generation set): a fresh control
    // socket and, for a pack, a fresh arena, the supervisor's ends kept here. Nothing for a
    // participant that does not bridge. Throws std::runtime_error (one line) when the
    // kernel refuses.
    std::optional<ChildEnds> open_life(const WorkerProcess& worker);
    // The life's process was spawned (the caller closes the child's ends): pairs it with
    // the other side's life, and tells a new host which packs there are.
    void spawned(WorkerProcess& worker);
    // The life's process exited (`reason` as the log says it; `restarts`: another life
    // follows): a Python pack's exit is told to the host, and the life's ends here are closed.
    void exited(WorkerProcess& worker, const std::string& reason, bool restarts);
    // The life was never spawned, or is over: closes its ends here.
    void close_life(const WorkerProcess& worker);
    // A Python pack was marked failed (`reason` as the log says it): told to the host.
    void failed(const WorkerProcess& worker, const std::string& reason);

private:
    // The supervisor's ends of one life.
    struct Life {
        std::uint32_t generation = 0;
        ipc::UniqueFd control;          // non-blocking; only written
        ipc::UniqueFd arena_read_only;  // a pack life's, handed to the host; never mapped here
    };

    WorkerProcess* host() const;
    static bool is_python_pack(const WorkerProcess& worker) { return worker.pack.python.has_value(); }
    // Gives the host life and `pack`'s life a call channel to each other, the host the
    // pack's arena, and both a new arena the host writes for that pack life alone.
    void pair(WorkerProcess& host, WorkerProcess& pack);
    void send(WorkerProcess& to, const std::string& message, std::span<const int> fds = {});

    const std::vector<std::unique_ptr<WorkerProcess>>& workers_;
    Stop stop_;
    HostRequests& host_requests_;
    std::map<std::uint32_t, Life> lives_;  // by slot: the lives open now
};

}  // namespace comfy::supervisor
