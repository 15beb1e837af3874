#pragma once
// Runs one side of a measurement in a forked peer process on a CPU of its own. The peer
// is always reaped, and a peer that dies early ends the benchmark at once (through a
// SIGCHLD handler) instead of leaving the initiator waiting forever for a reply.

#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace comfy::bench {

// Where the two processes run: on different CPUs whenever two are available, so a
// spinning side never has to be descheduled for its peer to make progress.
struct CpuPlacement {
    std::optional<int> initiator_cpu;
    std::optional<int> peer_cpu;
    std::string description;  // one line for the report
};

// Picks the first two CPUs this process may run on and pins the calling process (the
// initiator) to the first; throws BenchError when pinning fails.
CpuPlacement pin_initiator_and_choose_peer_cpu();

class PeerProcess {
public:
    // Forks. In the peer, returns pinned to cpus.peer_cpu with is_peer_side() true.
    // `measurement` names the measurement in error messages.
    PeerProcess(std::string_view measurement, const CpuPlacement& cpus);
    // Initiator side, when join() did not run (the initiator failed): kills and reaps the peer.
    ~PeerProcess();
    PeerProcess(const PeerProcess&) = delete;
    PeerProcess& operator=(const PeerProcess&) = delete;

    bool is_peer_side() const noexcept { return pid_ == 0; }

    // Peer side: runs `body` and ends the process with _exit, so none of the initiator's
    // destructors or stdio buffers run twice. A throwing body exits with status 1.
    template <class Body>
    [[noreturn]] void run_and_exit(Body&& body) noexcept {
        try {
            body();
        } catch (const std::exception& error) {
            exit_reporting(error.what());
        }
        ::_exit(0);
    }

    // Initiator side: waits for the peer; throws BenchError when it did not exit cleanly.
    void join();

private:
    void become_peer(const CpuPlacement& cpus, pid_t initiator) noexcept;
    [[noreturn]] void exit_reporting(const char* what) noexcept;
    void stop_watching() noexcept;

    std::string measurement_;
    pid_t pid_ = -1;
    bool joined_ = false;
    struct sigaction previous_sigchld_action_ {};
    sigset_t previous_signal_mask_{};
};

// Runs `peer_body` in a forked peer and `initiator_body` here; returns what the initiator
// body returns once the peer has exited cleanly.
template <class PeerBody, class InitiatorBody>
std::invoke_result_t<InitiatorBody&> run_with_peer_process(std::string_view measurement, const CpuPlacement& cpus,
                                                           PeerBody&& peer_body, InitiatorBody&& initiator_body) {
    PeerProcess peer(measurement, cpus);
    if (peer.is_peer_side()) peer.run_and_exit(peer_body);
    auto result = initiator_body();
    peer.join();
    return result;
}

}  // namespace comfy::bench
