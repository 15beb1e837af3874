#include "supervisor/ops/ops_http.hpp"

#include "supervisor/ops/log/log.hpp"

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace comfy::supervisor {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

// An answer as the connection sends it: never cached, and the connection closed after it.
http::response<http::string_body> http_response(OpsResponse answer, unsigned version) {
    http::response<http::string_body> response{static_cast<http::status>(answer.status), version};
    response.set(http::field::content_type, answer.content_type);
    response.set(http::field::cache_control, "no-store");
    response.keep_alive(false);
    response.body() = std::move(answer.body);
    response.prepare_payload();
    return response;
}

// One connection: read a request, answer it, close. Counted open while it lives.
class Session : public std::enable_shared_from_this<Session> {
public:
    Session(tcp::socket socket, std::shared_ptr<OpsHttpServer::Shared> shared)
        : stream_(std::move(socket)), shared_(std::move(shared)) {
        ++shared_->open;
    }
    ~Session() { --shared_->open; }
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    void run() {
        // A client that sends nothing in time does not hold a connection open.
        stream_.expires_after(std::chrono::seconds(10));
        http::async_read(stream_, buffer_, request_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
            if (!ec) self->answer();
        });
    }

private:
    void answer() {
        response_ = http_response(route(shared_->handlers, std::string_view(request_.method_string()),
                                        std::string_view(request_.target()), request_.body()),
                                  request_.version());
        http::async_write(stream_, response_, [self = shared_from_this()](beast::error_code, std::size_t) {
            beast::error_code ignored;
            self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
        });
    }

    beast::tcp_stream stream_;
    std::shared_ptr<OpsHttpServer::Shared> shared_;
    beast::flat_buffer buffer_;
    http::request<http::string_body> request_;
    http::response<http::string_body> response_;
};

// Past the cap: one small answer, written without waiting (non-blocking: it fits a fresh
// socket's buffer), and the connection closed.
void turn_away(tcp::socket socket) {
    auto busy = http_response(error_response(503, "too many open connections (" +
                                                      std::to_string(OpsHttpServer::kMaxConnections) +
                                                      "); try again when some have closed"),
                              11);
    boost::system::error_code ignored;
    socket.non_blocking(true, ignored);
    http::write(socket, busy, ignored);
    socket.shutdown(tcp::socket::shutdown_send, ignored);
    // The request read and dropped: a socket closed with unread data resets the
    // connection, which can discard the answer before the client reads it.
    char drained[4096];
    while (socket.read_some(boost::asio::buffer(drained), ignored) > 0) {
    }
}

}  // namespace

OpsHttpServer::OpsHttpServer(boost::asio::io_context& io, const std::string& address, unsigned short port,
                             OpsHandlers handlers)
    : acceptor_(io, tcp::endpoint(boost::asio::ip::make_address(address), port)),
      retry_(io),
      summary_(io),
      shared_(std::make_shared<Shared>(Shared{std::move(handlers), 0})) {}

unsigned short OpsHttpServer::port() const { return acceptor_.local_endpoint().port(); }

void OpsHttpServer::start() { accept(); }

void OpsHttpServer::stop() {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    retry_.cancel();
    summary_.cancel();
    for (const auto& line : log_limiter_.flush()) log_warning(line);
}

void OpsHttpServer::accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
        if (ec == boost::asio::error::operation_aborted || !acceptor_.is_open()) return;  // closed at shutdown
        if (ec) {
            accept_failed(ec);
            return;
        }
        accepted(std::move(socket));
        accept();
    });
}

void OpsHttpServer::accepted(tcp::socket socket) {
    if (shared_->open >= kMaxConnections) {
        turn_away(std::move(socket));
        return;
    }
    std::make_shared<Session>(std::move(socket), shared_)->run();
}

void OpsHttpServer::accept_failed(const boost::system::error_code& ec) {
    // Out of descriptors, most likely: the connection waits in the listen queue until one
    // is free, so try again after a pause rather than at once (the failure would repeat in
    // a busy loop) or never (the endpoints would be gone until a restart).
    for (const auto& line : log_limiter_.pass(
             "http", "accept errors",
             "http: cannot accept a connection (" + ec.message() + "); trying again every " +
                 std::to_string(kAcceptRetry.count()) + " ms (raise the open-file limit, LimitNOFILE, if this repeats)",
             LogLimiter::Clock::now())) {
        log_warning(line);
    }
    summarize_when_window_ends();
    retry_.expires_after(kAcceptRetry);
    retry_.async_wait([this](const boost::system::error_code& waited) {
        if (!waited && acceptor_.is_open()) accept();
    });
}

void OpsHttpServer::summarize_when_window_ends() {
    // Each failure puts the summary off: a storm that goes on has its summary written by
    // the limiter itself with its next line; one that ends has it written here.
    summary_.expires_after(kAcceptErrorWindow);
    summary_.async_wait([this](const boost::system::error_code& waited) {
        if (waited) return;
        for (const auto& line : log_limiter_.ended(LogLimiter::Clock::now())) log_warning(line);
    });
}

}  // namespace comfy::supervisor
