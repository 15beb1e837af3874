#pragma once
// The loop's ear for the participants' rings, at a cost that follows the participants with
// work, not the number of participants. Each life has a doorbell of its own (an eventfd
// its ring to the supervisor rings), and each participant is in one of two places: armed,
// its ring's waiter flag set and the loop waiting on its doorbell; or in the turn list,
// its flag cleared so that what it pushes meanwhile costs it no system call. A doorbell
// that rings puts its participant in the turn list; a round gives each listed participant
// one turn of at most kMessagesPerTurn messages, so that no one participant can starve the
// others, and arms again only a participant whose ring it found empty. An idle
// participant costs nothing per round: it is neither visited nor armed again. A ring that
// holds what its writer cannot have meant stops that participant.

#include "supervisor/lifecycle/turn_list.hpp"
#include "supervisor/lifecycle/worker_access.hpp"

#include <boost/asio/io_context.hpp>

#include <functional>
#include <vector>

namespace comfy::supervisor {

class MessagePump {
public:
    // How many messages one participant may hand over per turn.
    static constexpr int kMessagesPerTurn = 64;

    struct Handlers {
        std::function<void(WorkerProcess&, const MessageSlot&)> message;  // one message, in ring order
        std::function<void(WorkerProcess&)> turn_ended;  // after a participant's turn
        std::function<void()> round_ended;               // after every listed participant had its turn
    };
    MessagePump(boost::asio::io_context& io, WorkerAccess& lives, Handlers handlers);

    // A new life's ring to the supervisor is ready and empty: gives the life a doorbell
    // (worker.doorbell, for the child to inherit), arms its ring and waits on it. Throws
    // std::system_error when the kernel refuses an eventfd.
    void watch(WorkerProcess& worker);
    // The life ended (its rings are going): its doorbell is closed, any wait on it
    // cancelled, and it leaves the turn list.
    void forget(WorkerProcess& worker);

    // Rounds run until stop(); stop() also ends every wait on a doorbell.
    void start();
    void stop();

private:
    void await_doorbell(WorkerProcess& worker);
    void list(WorkerProcess& worker);
    void post_round();
    void round();
    void take_turn(WorkerProcess& worker);

    boost::asio::io_context& io_;
    WorkerAccess& lives_;
    Handlers handlers_;
    TurnList turns_;
    std::vector<WorkerProcess*> round_;  // the round under way (kept, so a round allocates nothing)
    bool round_posted_ = false;
    bool running_ = false;
};

}  // namespace comfy::supervisor
