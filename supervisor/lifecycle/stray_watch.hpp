#pragma once
// When strays are swept (lifecycle/strays.hpp): as a participant's life ends, and at each
// SIGCHLD (a stray died, and its children are the supervisor's now), until none is left.
// Each sweep that ended something says so in one line, naming the life whose they were;
// lives that end together (a shutdown) are swept at the last one's end, naming none.

#include "supervisor/lifecycle/strays.hpp"
#include "supervisor/lifecycle/worker_access.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <cstddef>
#include <functional>

namespace comfy::supervisor {

class StrayWatch {
public:
    // `after_child`: called after each SIGCHLD's sweep (the supervisor's shutdown may be done);
    // `also_ours`: a child that is no participant's and no stray either (a warm template).
    StrayWatch(boost::asio::io_context& io, WorkerAccess& lives, std::function<void()> after_child,
               std::function<bool(pid_t)> also_ours);
    ~StrayWatch();

    // Watches SIGCHLD until the loop ends.
    void start();
    // `ended`'s life has ended (its process reaped): ends what it left behind.
    void life_ended(const WorkerProcess& ended) { sweep(&ended); }
    // Strays signalled and not reaped yet: a shutdown waits for them.
    std::size_t unreaped() const noexcept { return strays_.unreaped(); }

private:
    void sweep(const WorkerProcess* ended);
    void watch();

    WorkerAccess& lives_;
    std::function<void()> after_child_;
    std::function<bool(pid_t)> also_ours_;
    Strays strays_;
    bool shared_ = false;                    // a sweep put off while lives ended together
    boost::asio::signal_set child_signals_;  // SIGCHLD
};

}  // namespace comfy::supervisor
