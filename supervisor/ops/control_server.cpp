#include "supervisor/ops/control_server.hpp"

#include "supervisor/ops/control_socket_file.hpp"
#include "supervisor/ops/log/log.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>

namespace comfy::supervisor {

namespace {

using boost::asio::local::stream_protocol;

// What a follower that stopped reading may have waiting; past it, it is let go.
constexpr std::size_t kMaxQueuedBytes = 1 << 20;

std::string pid_text(const ucred& peer) { return "pid " + std::to_string(peer.pid); }

}  // namespace

// One client: its credentials checked, its request read within bounds, its answer written;
// for events --follow, then every new event until it goes.
class ControlServer::Connection : public std::enable_shared_from_this<Connection> {
public:
    Connection(ControlServer& server, stream_protocol::socket socket, std::uint64_t id, const ucred& peer)
        : server_(server), socket_(std::move(socket)), deadline_(server.io_), id_(id), peer_(peer) {}

    pid_t peer_pid() const noexcept { return peer_.pid; }

    void begin() {
        if (peer_.uid != ::geteuid()) {
            // Every one of these is logged: another user knocking is worth a line each.
            server_.refusals_.count(ControlRefusal::uid);
            log_warning("control: refused a connection from uid " + std::to_string(peer_.uid) + " (" + pid_text(peer_) +
                        "): only uid " + std::to_string(::geteuid()) + ", the supervisor's, may use " +
                        server_.path_.string());
            finish(ctl::error_line(ctl::ControlError::not_permitted,
                                   "only uid " + std::to_string(::geteuid()) + " may use this supervisor's control socket"));
            return;
        }
        deadline_.expires_after(kRequestWait);
        deadline_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
            if (ec) return;
            self->server_.refuse(ControlRefusal::timeout, "control: closed a connection from " + pid_text(self->peer_) +
                                                              " that sent no whole request within " +
                                                              std::to_string(kRequestWait.count()) + " s");
            self->close();
        });
        boost::asio::async_read_until(socket_, boost::asio::dynamic_buffer(input_, ctl::kMaxRequestBytes), '\n',
                                      [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
                                          self->on_request(ec, n);
                                      });
    }

    // Idempotent; never called from inside the journal's telling of an event.
    void close() {
        if (closed_) return;
        closed_ = true;
        if (listener_) server_.journal_.unlisten(*listener_);
        deadline_.cancel();
        boost::system::error_code ignored;
        socket_.close(ignored);
        server_.connections_.erase(id_);
    }

private:
    void on_request(const boost::system::error_code& ec, std::size_t length) {
        if (closed_) return;
        deadline_.cancel();
        if (ec == boost::asio::error::not_found) {
            server_.refuse(ControlRefusal::too_large, "control: refused a request of more than " +
                                                          std::to_string(ctl::kMaxRequestBytes) + " bytes from " +
                                                          pid_text(peer_));
            finish(ctl::error_line(ctl::ControlError::bad_request, "a request has at most " +
                                                                      std::to_string(ctl::kMaxRequestBytes) + " bytes"));
            return;
        }
        if (ec) {
            close();
            return;
        }
        const auto parsed = ctl::parse_request(std::string_view(input_).substr(0, length - 1));
        if (const auto* problem = std::get_if<std::string>(&parsed)) {
            finish(ctl::error_line(ctl::ControlError::bad_request, *problem));
            return;
        }
        const auto& request = std::get<ctl::ControlRequest>(parsed);
        if (request.op != ctl::Op::events) {
            const ActionAnswer answer = server_.act(request);
            finish(ctl::answer_line(answer.error, answer.message, answer.fields));
            return;
        }
        send(ctl::json_line({{"ok", true}, {"last_seq", server_.journal_.last_seq()}}));
        const auto filter = request.failures ? EventFilter::failures : EventFilter::all;
        for (const auto& event : server_.journal_.since(request.since, SIZE_MAX, filter)) {
            send(ctl::json_line(to_json(event)));
        }
        if (!request.follow) {
            close_after_writing_ = true;
            write_next();
            return;
        }
        listener_ = server_.journal_.listen([weak = weak_from_this(), filter](const JournalEvent& event) {
            if (filter == EventFilter::failures && !is_failure(event)) return;
            if (const auto self = weak.lock()) self->send(ctl::json_line(to_json(event)));
        });
        watch_for_goodbye();
    }

    // A follower says nothing more: whatever it sends, or its end closing, ends it.
    void watch_for_goodbye() {
        socket_.async_read_some(boost::asio::buffer(goodbye_),
                                [self = shared_from_this()](const boost::system::error_code&, std::size_t) {
                                    self->close();
                                });
    }

    void finish(std::string line) {
        close_after_writing_ = true;
        send(std::move(line));
    }

    void send(std::string line) {
        if (closed_ || dropping_) return;
        if (queued_bytes_ + line.size() > kMaxQueuedBytes) {
            // Told from inside the journal's record(): the close waits for the loop.
            dropping_ = true;
            server_.refuse(ControlRefusal::slow_follower, "control: a follower of the events (" + pid_text(peer_) +
                                                              ") fell " + std::to_string(kMaxQueuedBytes) +
                                                              " bytes behind; letting it go");
            boost::asio::post(server_.io_, [self = shared_from_this()] { self->close(); });
            return;
        }
        queued_bytes_ += line.size();
        output_.push_back(std::move(line));
        write_next();
    }

    void write_next() {
        if (writing_ || closed_) return;
        if (output_.empty()) {
            if (close_after_writing_) close();
            return;
        }
        writing_ = true;
        boost::asio::async_write(socket_, boost::asio::buffer(output_.front()),
                                 [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
                                     self->writing_ = false;
                                     if (ec) {
                                         self->close();
                                         return;
                                     }
                                     self->queued_bytes_ -= self->output_.front().size();
                                     self->output_.pop_front();
                                     self->write_next();
                                 });
    }

    ControlServer& server_;
    stream_protocol::socket socket_;
    boost::asio::steady_timer deadline_;
    std::uint64_t id_;
    ucred peer_;
    std::string input_;
    std::deque<std::string> output_;
    std::size_t queued_bytes_ = 0;
    char goodbye_[64];
    std::optional<std::uint64_t> listener_;
    bool writing_ = false;
    bool close_after_writing_ = false;
    bool dropping_ = false;
    bool closed_ = false;
};

ControlServer::ControlServer(boost::asio::io_context& io, std::filesystem::path socket_path, ControlHandlers handlers,
                             EventJournal& journal, Refusals& refusals)
    : io_(io), path_(std::move(socket_path)), handlers_(std::move(handlers)), journal_(journal), refusals_(refusals),
      acceptor_(io), accept_pause_(io) {}

ControlServer::~ControlServer() { stop(); }

void ControlServer::start() {
    acceptor_.assign(stream_protocol(), listen_on_control_socket(path_));
    listening_ = true;
    accept();
}

void ControlServer::stop() {
    if (!listening_) return;
    listening_ = false;
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    accept_pause_.cancel();
    ::unlink(path_.c_str());
    for (const auto& line : refusal_log_.flush()) log_warning(line);
    auto open = connections_;
    for (auto& [id, weak] : open) {
        if (const auto connection = weak.lock()) connection->close();
    }
}

void ControlServer::accept() {
    acceptor_.async_wait(stream_protocol::acceptor::wait_read, [this](const boost::system::error_code& ec) {
        if (ec || !listening_) return;
        for (;;) {
            // accept4 rather than Asio's accept: the descriptor is close-on-exec from birth.
            const int fd = ::accept4(acceptor_.native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd >= 0) {
                take(fd);
                continue;
            }
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            // Out of descriptors, most likely: the pending connection stays readable, so
            // wait a moment rather than spin on it.
            log_warning(std::string("control: accept failed: ") + std::strerror(errno) + "; retrying in a second");
            accept_pause_.expires_after(std::chrono::seconds(1));
            accept_pause_.async_wait([this](const boost::system::error_code& wait_ec) {
                if (!wait_ec && listening_) accept();
            });
            return;
        }
        accept();
    });
}

void ControlServer::take(int fd) {
    stream_protocol::socket socket(io_);
    boost::system::error_code ec;
    socket.assign(stream_protocol(), fd, ec);
    if (ec) {
        ::close(fd);
        return;
    }
    ucred peer{};
    socklen_t size = sizeof peer;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0) return;  // the socket closes as it goes
    // One process's share first, so that the one that hogs is told so, and the others
    // keep the rest of the connections.
    std::size_t of_peer = 0;
    for (const auto& [id, weak] : connections_) {
        if (const auto connection = weak.lock(); connection && connection->peer_pid() == peer.pid) ++of_peer;
    }
    std::optional<std::string> refused;
    if (of_peer >= kMaxConnectionsPerProcess) {
        refuse(ControlRefusal::client_connections,
               "control: turned away a connection from " + pid_text(peer) + ": it holds " +
                   std::to_string(kMaxConnectionsPerProcess) + " open already, the most one process may");
        refused = "this process holds " + std::to_string(kMaxConnectionsPerProcess) +
                  " control connections already, the most one process may; close one and try again";
    } else if (connections_.size() >= kMaxConnections) {
        refuse(ControlRefusal::connections, "control: turned away a connection from " + pid_text(peer) + ": " +
                                                std::to_string(kMaxConnections) + " are open, the most");
        refused = "too many control connections at once; try again";
    }
    if (refused) {
        const std::string line = ctl::error_line(ctl::ControlError::refused, *refused);
        [[maybe_unused]] const auto sent = ::send(fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        return;  // the socket closes as it goes
    }
    const std::uint64_t id = next_connection_++;
    auto connection = std::make_shared<Connection>(*this, std::move(socket), id, peer);
    connections_.emplace(id, connection);
    connection->begin();
}

void ControlServer::refuse(ControlRefusal reason, std::string line) {
    refusals_.count(reason);
    for (const auto& out : refusal_log_.pass("control", refusal_name(reason), std::move(line), LogLimiter::Clock::now())) {
        log_warning(out);
    }
}

ActionAnswer ControlServer::act(const ctl::ControlRequest& request) const {
    switch (request.op) {
        case ctl::Op::free: return handlers_.free_all();
        case ctl::Op::retry: return request.pack.empty() ? handlers_.retry_failed() : handlers_.start(request.pack);
        case ctl::Op::restart: return handlers_.restart(request.pack);
        case ctl::Op::stop: return handlers_.stop(request.pack);
        case ctl::Op::start: return handlers_.start(request.pack);
        case ctl::Op::release: return handlers_.release(request.pack, request.pins);
        case ctl::Op::info: return handlers_.info();
        case ctl::Op::events: break;  // answered by the connection, from the journal
    }
    return {ctl::ControlError::bad_request, "not an action"};
}

}  // namespace comfy::supervisor
