#include "supervisor/ops/ops_http.hpp"

#include "supervisor/ctl/control_protocol.hpp"
#include "supervisor/ops/log/log.hpp"

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <optional>

namespace comfy::supervisor {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

// An answer as the connection sends it: never cached, and the connection closed after it.
// To a HEAD, the head alone, its Content-Length the body's that GET would have.
http::response<http::string_body> http_response(OpsResponse answer, unsigned version, bool head_only = false) {
    http::response<http::string_body> response{static_cast<http::status>(answer.status), version};
    response.set(http::field::content_type, answer.content_type);
    response.set(http::field::cache_control, "no-store");
    response.keep_alive(false);
    response.body() = std::move(answer.body);
    response.prepare_payload();
    if (head_only) response.body().clear();
    return response;
}

// A header by its field or, for one Beast has no field for, its name.
template <typename Key>
std::optional<std::string_view> header(const http::request<http::string_body>& request, Key key) {
    const auto found = request.find(key);
    if (found == request.end()) return std::nullopt;
    return std::string_view(found->value());
}

std::string seconds(std::chrono::seconds time) { return std::to_string(time.count()) + " s"; }

// One connection: read a request within its time-outs and limits, answer it, close.
// Counted open, and against its client's share, while it lives.
class Session : public std::enable_shared_from_this<Session> {
public:
    Session(tcp::socket socket, std::shared_ptr<OpsHttpServer::Shared> shared, std::string client, std::string peer)
        : stream_(std::move(socket)), shared_(std::move(shared)), client_(std::move(client)), peer_(std::move(peer)) {
        ++shared_->open;
        ++shared_->open_by_client[client_];
    }
    ~Session() {
        --shared_->open;
        if (--shared_->open_by_client[client_] == 0) shared_->open_by_client.erase(client_);
    }
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    void run() {
        parser_.header_limit(OpsHttpServer::kMaxHeaderBytes);
        parser_.body_limit(OpsHttpServer::kMaxBodyBytes);
        // The head first, then the body, each against its own clock: a client that
        // trickles bytes holds a connection no longer than the two together.
        stream_.expires_after(OpsHttpServer::kHeaderTimeout);
        http::async_read_header(stream_, buffer_, parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
            if (ec) {
                self->failed(ec, HttpRefusal::header_timeout,
                             "no whole request head within " + seconds(OpsHttpServer::kHeaderTimeout));
            } else {
                self->read_body();
            }
        });
    }

private:
    void read_body() {
        stream_.expires_after(OpsHttpServer::kBodyTimeout);
        http::async_read(stream_, buffer_, parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
            if (ec) {
                self->failed(ec, HttpRefusal::body_timeout,
                             "no whole body within " + seconds(OpsHttpServer::kBodyTimeout) + " of its head");
            } else {
                self->answer();
            }
        });
    }

    // A time-out (the stream is closed already) or a limit is a refusal; a client that
    // went or sent what is not HTTP is let go.
    void failed(const beast::error_code& ec, HttpRefusal timeout, const std::string& late) {
        if (ec == beast::error::timeout) {
            shared_->refuse(timeout, "http: closed a connection from " + peer_ + " that sent " + late);
            return;
        }
        const bool head = ec == http::error::header_limit;
        if (!head && ec != http::error::body_limit) return;
        const std::string what = head ? "a request head has at most " + std::to_string(OpsHttpServer::kMaxHeaderBytes)
                                      : "a request body has at most " + std::to_string(OpsHttpServer::kMaxBodyBytes);
        shared_->refuse(HttpRefusal::too_large, "http: refused a request from " + peer_ + ": " + what + " bytes");
        write(error_response(head ? 431 : 413, what + " bytes"), 11);
    }

    void answer() {
        const auto& request = parser_.get();
        const bool head_only = request.method() == http::verb::head;  // HTTP: a HEAD's answer has no body
        const RequestHead head{request.method_string(), request.target(), header(request, http::field::host),
                               header(request, http::field::origin), header(request, "Sec-Fetch-Site"),
                               header(request, http::field::authorization)};
        if (auto refused = screen(shared_->access, head)) {
            shared_->refuse(refused->reason, "http: refused " + ctl::printable(head.method, 16) + " " +
                                                 ctl::printable(head.target.substr(0, head.target.find('?')), 60) +
                                                 " from " + peer_ + ": " + refused->text);
            write(std::move(refused->answer), request.version(), refused->authenticate, head_only);
            return;
        }
        write(route(shared_->handlers, head.method, head.target, request.body()), request.version(), {}, head_only);
    }

    void write(OpsResponse answer, unsigned version, const std::string& authenticate = {}, bool head_only = false) {
        response_ = http_response(std::move(answer), version, head_only);
        if (!authenticate.empty()) response_.set(http::field::www_authenticate, authenticate);
        // A client that does not read its answer does not hold the connection either.
        stream_.expires_after(OpsHttpServer::kWriteTimeout);
        http::async_write(stream_, response_, [self = shared_from_this()](beast::error_code, std::size_t) {
            beast::error_code ignored;
            self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
        });
    }

    beast::tcp_stream stream_;
    std::shared_ptr<OpsHttpServer::Shared> shared_;
    std::string client_;  // whose share it counts against
    std::string peer_;    // its address, for the log
    beast::flat_buffer buffer_;
    http::request_parser<http::string_body> parser_;
    http::response<http::string_body> response_;
};

// Past a cap: one small answer, written without waiting (non-blocking: it fits a fresh
// socket's buffer), and the connection closed.
void turn_away(tcp::socket socket, OpsResponse answer) {
    const auto busy = http_response(std::move(answer), 11);
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

std::string client_key(const boost::asio::ip::address& address) {
    if (address.is_v4()) return address.to_string();
    const auto v6 = address.to_v6();
    if (v6.is_v4_mapped()) return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, v6).to_string();
    auto bytes = v6.to_bytes();
    std::fill(bytes.begin() + 8, bytes.end(), 0);
    return boost::asio::ip::address_v6(bytes).to_string() + "/64";
}

void OpsHttpServer::Shared::refuse(HttpRefusal reason, std::string line) {
    refusals.count(reason);
    for (const auto& out : refusal_log.pass("http", refusal_name(reason), std::move(line), LogLimiter::Clock::now())) {
        log_warning(out);
    }
}

OpsHttpServer::OpsHttpServer(boost::asio::io_context& io, const std::string& address, unsigned short port,
                             OpsHandlers handlers, HttpAccess access, Refusals& refusals)
    : acceptor_(io, tcp::endpoint(boost::asio::ip::make_address(address), port)),
      retry_(io),
      summary_(io),
      shared_(std::make_shared<Shared>(std::move(handlers), std::move(access), refusals)) {}

unsigned short OpsHttpServer::port() const { return acceptor_.local_endpoint().port(); }

void OpsHttpServer::start() { accept(); }

void OpsHttpServer::stop() {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    retry_.cancel();
    summary_.cancel();
    for (const auto& line : log_limiter_.flush()) log_warning(line);
    for (const auto& line : shared_->refusal_log.flush()) log_warning(line);
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
    boost::system::error_code ec;
    const auto peer = socket.remote_endpoint(ec);
    if (ec) return;  // it went already
    const auto client = client_key(peer.address());
    const auto held = shared_->open_by_client.find(client);
    if (held != shared_->open_by_client.end() && held->second >= kMaxConnectionsPerClient) {
        shared_->refuse(HttpRefusal::client_connections,
                        "http: turned away a connection from " + peer.address().to_string() + ": its client (" +
                            client + ") holds " + std::to_string(kMaxConnectionsPerClient) +
                            " open already, the most one client may");
        turn_away(std::move(socket),
                  error_response(429, "too many open connections from this client (" +
                                          std::to_string(kMaxConnectionsPerClient) + "); try again when some have closed"));
        return;
    }
    if (shared_->open >= kMaxConnections) {
        shared_->refuse(HttpRefusal::connections, "http: turned away a connection from " + peer.address().to_string() +
                                                      ": " + std::to_string(kMaxConnections) + " are open, the most");
        turn_away(std::move(socket), error_response(503, "too many open connections (" + std::to_string(kMaxConnections) +
                                                             "); try again when some have closed"));
        return;
    }
    std::make_shared<Session>(std::move(socket), shared_, client, peer.address().to_string())->run();
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
