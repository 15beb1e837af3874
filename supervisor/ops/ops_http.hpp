#pragma once
// The operator's HTTP endpoints on the supervisor's own event loop (Boost.Beast); what
// each answers is in supervisor/ops/ops_routes.hpp. One request per connection; every answer
// closes it. Off unless the config names a listen address.
//
// The server outlives a shortage of descriptors: when accept fails (EMFILE, ENFILE,
// ENOBUFS...) it logs one line (rate-limited) and tries again after a pause, rather than
// stop listening for good; how many more failed is logged once that line's window ends,
// whether or not the failures go on. At most kMaxConnections connections are open at
// once; one more is answered 503 at once and closed, so a pile of idle clients cannot take
// the supervisor's descriptors. A connection that sends no whole request within 10 s is closed.

#include "supervisor/ops/log/log_limiter.hpp"
#include "supervisor/ops/ops_routes.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace comfy::supervisor {

class OpsHttpServer {
public:
    static constexpr std::size_t kMaxConnections = 64;
    static constexpr std::chrono::milliseconds kAcceptRetry{250};

    // Binds `address:port` (port 0: any free port). Throws std::system_error on failure.
    OpsHttpServer(boost::asio::io_context& io, const std::string& address, unsigned short port, OpsHandlers handlers);

    unsigned short port() const;
    void start();
    void stop();

    // What the open connections share with the server; they may outlive it at shutdown.
    struct Shared {
        OpsHandlers handlers;
        std::size_t open = 0;
    };

private:
    void accept();
    void accepted(boost::asio::ip::tcp::socket socket);
    void accept_failed(const boost::system::error_code& ec);
    // Logs the summary of the accept errors left out, once their window has ended.
    void summarize_when_window_ends();

    static constexpr std::chrono::seconds kAcceptErrorWindow{10};

    boost::asio::ip::tcp::acceptor acceptor_;
    boost::asio::steady_timer retry_;
    boost::asio::steady_timer summary_;
    std::shared_ptr<Shared> shared_;
    LogLimiter log_limiter_{1, kAcceptErrorWindow};
};

}  // namespace comfy::supervisor
