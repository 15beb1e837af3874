#include "supervisor/lifecycle/message_pump.hpp"

#include <boost/asio/post.hpp>

#include <fcntl.h>

#include <cerrno>
#include <system_error>

namespace comfy::supervisor {

MessagePump::MessagePump(boost::asio::io_context& io, WorkerAccess& lives, Handlers handlers)
    : io_(io), lives_(lives), handlers_(std::move(handlers)) {}

void MessagePump::start() {
    running_ = true;
    post_round();  // for those whose doorbells rang before the loop ran
}

void MessagePump::stop() {
    running_ = false;
    for (const auto& worker : lives_.workers()) {
        if (worker->pump.watch.is_open()) worker->pump.watch.close();
    }
}

void MessagePump::watch(WorkerProcess& worker) {
    forget(worker);
    worker.pump.doorbell.emplace();
    // A duplicate the loop owns (closing it ends a wait), never inherited by a child.
    const int duplicate = ::fcntl(worker.pump.doorbell->fd(), F_DUPFD_CLOEXEC, 0);
    if (duplicate < 0) throw std::system_error(errno, std::generic_category(), "fcntl(F_DUPFD_CLOEXEC)");
    worker.pump.watch.assign(duplicate);
    worker.pump.rung = false;
    // The fresh ring is empty, so there is nothing to miss: arming it before the child can
    // write its Hello makes that Hello ring the doorbell.
    worker.from_worker->arm_doorbell();
    await_doorbell(worker);
}

void MessagePump::forget(WorkerProcess& worker) {
    turns_.remove(worker);
    if (worker.pump.watch.is_open()) worker.pump.watch.close();  // its wait ends with operation_aborted
    worker.pump.doorbell.reset();
    worker.pump.rung = false;
}

void MessagePump::await_doorbell(WorkerProcess& worker) {
    worker.pump.watch.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                                 [this, &worker, generation = worker.generation](const boost::system::error_code& ec) {
                                     // Closed (the life ended, or stop()), or a wait of an earlier life.
                                     if (ec || worker.generation != generation || !worker.from_worker) return;
                                     worker.pump.rung = true;
                                     list(worker);
                                 });
}

void MessagePump::list(WorkerProcess& worker) {
    turns_.add(worker);
    post_round();
}

void MessagePump::post_round() {
    if (round_posted_ || !running_ || turns_.empty()) return;
    round_posted_ = true;
    boost::asio::post(io_, [this] { round(); });
}

void MessagePump::round() {
    round_posted_ = false;
    if (!running_) return;
    turns_.take(round_);
    for (WorkerProcess* worker : round_) take_turn(*worker);
    handlers_.round_ended();
}

void MessagePump::take_turn(WorkerProcess& worker) {
    if (!worker.alive() || !worker.from_worker) return;
    auto& ring = *worker.from_worker;
    // Disarmed while its turn lasts: what it pushes meanwhile costs it no system call.
    ring.disarm();
    if (std::exchange(worker.pump.rung, false)) worker.pump.doorbell->drain();
    MessageSlot slot{};
    int taken = 0;
    auto state = ipc::PopResult::ok;
    for (; taken < kMessagesPerTurn && worker.alive() && worker.from_worker; ++taken) {
        state = ring.try_pop(slot);
        if (state != ipc::PopResult::ok) break;
        handlers_.message(worker, slot);
    }
    handlers_.turn_ended(worker);
    if (!worker.alive() || !worker.from_worker || !worker.pump.watch.is_open()) return;
    // A full turn (state ok) may have left more; an emptied ring is armed and checked once
    // more (its fence pairs with the producer's), so that a message pushed after the check
    // rings.
    if (state == ipc::PopResult::empty) state = ring.arm_doorbell();
    if (state == ipc::PopResult::corrupt) {
        // Heard no more (neither listed nor armed): it is ending.
        lives_.terminate(worker, "its ring to the supervisor is corrupt");
    } else if (state == ipc::PopResult::ok) {
        list(worker);
    } else {
        await_doorbell(worker);
    }
}

}  // namespace comfy::supervisor
