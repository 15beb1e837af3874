#pragma once
// The loop's ear for the participants' rings. Every participant rings one doorbell (an
// eventfd) with a message it writes while the supervisor waits; the pump sleeps on it,
// then takes each participant's messages in turn, at most kMessagesPerTurn before the next
// gets its turn, so that no one participant can starve the others. A ring that holds what
// its writer cannot have meant stops that participant.

#include "ipc/eventfd.hpp"
#include "supervisor/lifecycle/worker_access.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <functional>

namespace comfy::supervisor {

class MessagePump {
public:
    // How many messages one participant may hand over per wake-up.
    static constexpr int kMessagesPerTurn = 64;

    struct Handlers {
        std::function<void(WorkerProcess&, const MessageSlot&)> message;  // one message, in ring order
        std::function<void(WorkerProcess&)> turn_ended;  // after a participant's turn
        std::function<void()> round_ended;               // after every participant had its turn
    };
    // `doorbell` is the one every participant is given; it outlives the pump.
    MessagePump(boost::asio::io_context& io, const ipc::EventFd& doorbell, WorkerAccess& lives, Handlers handlers);

    // Waits for the next message, and again after each round, until stop().
    void start();
    void stop();

private:
    void wait();
    void drain();

    boost::asio::io_context& io_;
    const ipc::EventFd& doorbell_;
    boost::asio::posix::stream_descriptor watch_;  // a duplicate of the doorbell, for the loop to wait on
    WorkerAccess& lives_;
    Handlers handlers_;
};

}  // namespace comfy::supervisor
