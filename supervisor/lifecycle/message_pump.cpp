#include "supervisor/lifecycle/message_pump.hpp"

#include <boost/asio/post.hpp>

#include <unistd.h>

namespace comfy::supervisor {

MessagePump::MessagePump(boost::asio::io_context& io, const ipc::EventFd& doorbell, WorkerAccess& lives,
                         Handlers handlers)
    : io_(io), doorbell_(doorbell), watch_(io, ::dup(doorbell.fd())), lives_(lives), handlers_(std::move(handlers)) {}

void MessagePump::start() { wait(); }

void MessagePump::stop() { watch_.close(); }

void MessagePump::wait() {
    // Ask every worker to ring the doorbell on its next message; if one already has a
    // message waiting, do not sleep at all.
    bool pending = false;
    for (const auto& worker : lives_.workers()) {
        if (worker->alive() && worker->from_worker && worker->from_worker->arm_doorbell() != ipc::PopResult::empty) {
            pending = true;
        }
    }
    if (pending) {
        boost::asio::post(io_, [this] { drain(); });
        return;
    }
    watch_.async_wait(boost::asio::posix::stream_descriptor::wait_read, [this](const boost::system::error_code& ec) {
        if (!ec) drain();
    });
}

void MessagePump::drain() {
    doorbell_.drain();
    for (const auto& worker_ptr : lives_.workers()) {
        WorkerProcess& worker = *worker_ptr;
        if (!worker.alive() || !worker.from_worker) continue;
        worker.from_worker->disarm();
        MessageSlot slot{};
        for (int n = 0; n < kMessagesPerTurn && worker.alive(); ++n) {
            const auto state = worker.from_worker->try_pop(slot);
            if (state == ipc::PopResult::empty) break;
            if (state == ipc::PopResult::corrupt) {
                lives_.terminate(worker, "its ring to the supervisor is corrupt");
                break;
            }
            handlers_.message(worker, slot);
        }
        handlers_.turn_ended(worker);
    }
    handlers_.round_ended();
    wait();
}

}  // namespace comfy::supervisor
