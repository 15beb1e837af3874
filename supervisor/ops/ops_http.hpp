#pragma once
// The operator's HTTP endpoints on the supervisor's own event loop (Boost.Beast); what
// each answers is in supervisor/ops/ops_routes.hpp, and which requests are answered at
// all (Host, Origin, the token) in supervisor/ops/http_guard.hpp. One request per
// connection; every answer closes it. Off unless the config names a listen address.
//
// No client can hold the server: at most kMaxConnections connections are open at once,
// and one client (an IPv4 address, an IPv6 /64) at most kMaxConnectionsPerClient of them,
// so a client that opens connections and trickles bytes (slowloris) takes its own share
// and no more; past either cap a connection is answered at once (503 or 429) and closed.
// A request's head must come whole within kHeaderTimeout of the connection, its body
// within kBodyTimeout after that, and its answer be taken within kWriteTimeout, or the
// connection is closed. Every refusal is counted (comfy_http_refused_total) and logged,
// a line per reason at most every 10 s.
//
// The server outlives a shortage of descriptors: when accept fails (EMFILE, ENFILE,
// ENOBUFS...) it logs one line (rate-limited) and tries again after a pause, rather than
// stop listening for good; how many more failed is logged once that line's window ends,
// whether or not the failures go on.

#include "supervisor/ops/http_guard.hpp"
#include "supervisor/ops/log/log_limiter.hpp"
#include "supervisor/ops/ops_routes.hpp"
#include "supervisor/ops/refusals.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>

namespace comfy::supervisor {

class OpsHttpServer {
public:
    static constexpr std::size_t kMaxConnections = 64;
    static constexpr std::size_t kMaxConnectionsPerClient = 16;
    static constexpr std::chrono::seconds kHeaderTimeout{5};
    static constexpr std::chrono::seconds kBodyTimeout{5};
    static constexpr std::chrono::seconds kWriteTimeout{10};  // for the answer to be taken
    static constexpr std::size_t kMaxHeaderBytes = 8 << 10;
    static constexpr std::size_t kMaxBodyBytes = 64 << 10;  // POST /free's body is a few bytes
    static constexpr std::chrono::milliseconds kAcceptRetry{250};

    // Binds `address:port` (port 0: any free port). Throws std::system_error on failure.
    // `refusals` outlives the loop's handlers.
    OpsHttpServer(boost::asio::io_context& io, const std::string& address, unsigned short port, OpsHandlers handlers,
                  HttpAccess access, Refusals& refusals);

    unsigned short port() const;
    void start();
    void stop();

    // What the open connections share with the server; they may outlive it at shutdown.
    struct Shared {
        Shared(OpsHandlers handlers_in, HttpAccess access_in, Refusals& refusals_in)
            : handlers(std::move(handlers_in)), access(std::move(access_in)), refusals(refusals_in) {}

        OpsHandlers handlers;
        HttpAccess access;
        Refusals& refusals;
        std::size_t open = 0;
        std::map<std::string, std::size_t> open_by_client;  // by client_key()
        LogLimiter refusal_log{1, std::chrono::seconds(10)};

        // Counts a refusal and logs `line`, unless its reason had its line in this window.
        void refuse(HttpRefusal reason, std::string line);
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

// Whose share a connection counts against: an IPv4 address (an IPv4 address mapped into
// IPv6 is the same client), or an IPv6 address's /64, as one machine usually holds a
// whole /64.
std::string client_key(const boost::asio::ip::address& address);

}  // namespace comfy::supervisor
