#pragma once
// The supervisor's control socket (docs/SECURITY.md, "The control socket"): a Unix stream
// socket, mode 0600, in a folder of mode 0700 that is this user's alone, one per instance;
// every connection's peer must be of the supervisor's effective uid (SO_PEERCRED). It
// speaks supervisor/ctl/control_protocol.hpp: one request per connection, answered from
// `ControlHandlers`, or, for events, from the journal (following it while the client
// stays). Bounded: the request's size and the wait for it, the connections open at once
// and those of one process (by its SO_PEERCRED pid, so that one process, a follower of
// the events or a client that says nothing, cannot lock comfyctl out), and what a
// follower that does not read may have queued. Each refusal is counted
// (comfy_control_refused_total). Every descriptor is close-on-exec. Lives on the
// supervisor's event loop.

#include "supervisor/ctl/control_protocol.hpp"
#include "supervisor/ops/log/event_journal.hpp"
#include "supervisor/ops/log/log_limiter.hpp"
#include "supervisor/ops/refusals.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

namespace comfy::supervisor {

// What an action came to: done (no error) or not, one line saying so, and any figures
// for the answer's JSON (unknown_pack lists the packs; info gives the reserve).
struct ActionAnswer {
    std::optional<ctl::ControlError> error;
    std::string message;
    nlohmann::json fields = nlohmann::json::object();
};

struct ControlHandlers {
    std::function<ActionAnswer(const std::string& pack)> restart;
    std::function<ActionAnswer(const std::string& pack)> stop;
    std::function<ActionAnswer(const std::string& pack)> start;
    std::function<ActionAnswer(const std::string& pack, std::optional<std::uint64_t> pins)> release;
    std::function<ActionAnswer()> free_all;
    std::function<ActionAnswer()> retry_failed;
    std::function<ActionAnswer()> info;
};

// The control socket cannot be made; what() is one line saying what to do.
class ControlSocketError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class ControlServer {
public:
    static constexpr std::size_t kMaxConnections = 16;
    static constexpr std::size_t kMaxConnectionsPerProcess = 4;
    static constexpr std::chrono::seconds kRequestWait{5};  // a client that connects and says nothing

    // `journal` and `refusals` outlive the server.
    ControlServer(boost::asio::io_context& io, std::filesystem::path socket_path, ControlHandlers handlers,
                  EventJournal& journal, Refusals& refusals);
    ~ControlServer();
    ControlServer(const ControlServer&) = delete;
    ControlServer& operator=(const ControlServer&) = delete;

    // Makes the folder (or takes it, when it is ours: mode 0700), replaces a stale socket
    // file, and listens. Throws ControlSocketError.
    void start();
    // Closes the socket and every connection, and removes the socket file.
    void stop();
    const std::filesystem::path& path() const noexcept { return path_; }

private:
    class Connection;
    friend class Connection;

    void accept();
    void take(int fd);
    // Counts a refusal and logs `line`, unless its reason had its line in this window.
    void refuse(ControlRefusal reason, std::string line);
    // The answer to a request other than events.
    ActionAnswer act(const ctl::ControlRequest& request) const;

    boost::asio::io_context& io_;
    std::filesystem::path path_;
    ControlHandlers handlers_;
    EventJournal& journal_;
    Refusals& refusals_;
    LogLimiter refusal_log_{1, std::chrono::seconds(10)};
    boost::asio::local::stream_protocol::acceptor acceptor_;
    boost::asio::steady_timer accept_pause_;  // after accept failed for want of descriptors
    std::map<std::uint64_t, std::weak_ptr<Connection>> connections_;
    std::uint64_t next_connection_ = 1;
    bool listening_ = false;
};

}  // namespace comfy::supervisor
