#include "supervisor/ops_http.hpp"

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <memory>

namespace comfy::supervisor {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

// One connection: read a request, answer it, close.
class Session : public std::enable_shared_from_this<Session> {
public:
    Session(tcp::socket socket, const OpsHandlers& handlers) : stream_(std::move(socket)), handlers_(handlers) {}

    void run() {
        // A client that sends nothing in time does not hold a connection open.
        stream_.expires_after(std::chrono::seconds(10));
        http::async_read(stream_, buffer_, request_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
            if (!ec) self->answer();
        });
    }

private:
    void answer() {
        const auto target = std::string(request_.target());
        const auto method = request_.method();
        if (target == "/census" && method == http::verb::get) {
            respond(http::status::ok, "application/json", handlers_.census_json());
        } else if (target == "/metrics" && method == http::verb::get) {
            respond(http::status::ok, "text/plain; version=0.0.4", handlers_.metrics_text());
        } else if ((target == "/free" || target == "/api/free") && method == http::verb::post) {
            handlers_.free_everything();
            respond(http::status::accepted, "application/json",
                    "{\"status\": \"every worker was asked to release what it holds\"}\n");
        } else {
            respond(http::status::not_found, "application/json",
                    "{\"error\": \"no such endpoint; try GET /census, GET /metrics or POST /free\"}\n");
        }
    }

    void respond(http::status status, const char* type, std::string body) {
        response_.result(status);
        response_.version(request_.version());
        response_.set(http::field::content_type, type);
        response_.keep_alive(false);
        response_.body() = std::move(body);
        response_.prepare_payload();
        http::async_write(stream_, response_, [self = shared_from_this()](beast::error_code, std::size_t) {
            beast::error_code ignored;
            self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
        });
    }

    beast::tcp_stream stream_;
    const OpsHandlers& handlers_;
    beast::flat_buffer buffer_;
    http::request<http::string_body> request_;
    http::response<http::string_body> response_;
};

}  // namespace

OpsHttpServer::OpsHttpServer(boost::asio::io_context& io, const std::string& address, unsigned short port,
                             OpsHandlers handlers)
    : acceptor_(io, tcp::endpoint(boost::asio::ip::make_address(address), port)), handlers_(std::move(handlers)) {}

unsigned short OpsHttpServer::port() const { return acceptor_.local_endpoint().port(); }

void OpsHttpServer::start() { accept(); }

void OpsHttpServer::stop() {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
}

void OpsHttpServer::accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
        if (ec) return;  // closed at shutdown
        std::make_shared<Session>(std::move(socket), handlers_)->run();
        accept();
    });
}

}  // namespace comfy::supervisor
