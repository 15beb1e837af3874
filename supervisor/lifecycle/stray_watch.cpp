#include "supervisor/lifecycle/stray_watch.hpp"

#include "supervisor/ops/log/log.hpp"

#include <signal.h>

#include <algorithm>
#include <utility>

namespace comfy::supervisor {

StrayWatch::StrayWatch(boost::asio::io_context& io, WorkerAccess& lives, std::function<void()> after_child,
                       std::function<bool(pid_t)> also_ours)
    : lives_(lives), after_child_(std::move(after_child)), also_ours_(std::move(also_ours)), child_signals_(io, SIGCHLD) {}

StrayWatch::~StrayWatch() {
    // The loop is over and every participant reaped: whatever is left goes too.
    strays_.sweep([](pid_t) { return false; });
}

void StrayWatch::start() { watch(); }

void StrayWatch::watch() {
    child_signals_.async_wait([this](const boost::system::error_code& ec, int) {
        if (ec) return;
        sweep(nullptr);
        after_child_();
        watch();
    });
}

void StrayWatch::sweep(const WorkerProcess* ended) {
    const auto& workers = lives_.workers();
    // A participant's exit its pidfd's handler has yet to take sweeps then, naming it; lives
    // that end together (a shutdown) are swept at the last one's end, naming none of them.
    if (std::any_of(workers.begin(), workers.end(), [&](const auto& w) { return w.get() != ended && w->exited(); })) {
        shared_ = shared_ || ended != nullptr;
        return;
    }
    if (std::exchange(shared_, false)) ended = nullptr;
    const auto swept = strays_.sweep([&](pid_t pid) {
        return also_ours_(pid) ||
               std::any_of(workers.begin(), workers.end(), [pid](const auto& w) { return w->process.pid == pid; });
    });
    const bool sandboxes = std::any_of(workers.begin(), workers.end(), [](const auto& w) { return w->pack.sandbox; });
    const std::string text =
        Strays::describe(swept, ended ? "its life left behind" : "left behind by a life that ended", sandboxes);
    if (text.empty()) return;
    if (ended) {
        lives_.happened(LogLevel::warning, *ended, "strays", text, {{"count", swept.size()}});
    } else {
        log_line(LogLevel::warning, text);
    }
}

}  // namespace comfy::supervisor
