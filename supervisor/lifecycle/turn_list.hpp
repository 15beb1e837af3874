#pragma once
// The participants waiting for a turn of the message pump (message_pump.hpp), in the order
// they were listed, each at most once: a round visits these and no other.

#include "ipc/eventfd.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <optional>
#include <vector>

namespace comfy::supervisor {

struct WorkerProcess;

// What the message pump keeps for one participant's life.
struct PumpState {
    explicit PumpState(boost::asio::io_context& io) : watch(io) {}

    // This life's doorbell, rung by its ring to the supervisor; the child holds a copy.
    std::optional<ipc::EventFd> doorbell;
    boost::asio::posix::stream_descriptor watch;  // a duplicate of the doorbell, for the loop to wait on
    bool listed = false;  // in the turn list: its ring is disarmed and nothing waits on its doorbell
    bool rung = false;    // its doorbell rang since its last turn, which drains it
};

class TurnList {
public:
    // Lists `worker` for the next round, unless it is listed already.
    void add(WorkerProcess& worker);
    // Takes `worker` off the list (its life ended).
    void remove(WorkerProcess& worker);
    // Moves every listed participant into `round` (emptied first) and empties the list:
    // each may be listed again during the round, for the next one.
    void take(std::vector<WorkerProcess*>& round);
    bool empty() const noexcept { return listed_.empty(); }

private:
    std::vector<WorkerProcess*> listed_;
};

}  // namespace comfy::supervisor
