#include "supervisor/ctl/control_client.hpp"

#include "supervisor/ctl/control_path.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace comfy::ctl {

ControlClient::ControlClient(const std::string& instance) : path_(control_socket_to_reach(instance).string()) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (path_.size() >= sizeof address.sun_path) {
        throw ControlUnreachable("control socket " + path_ + ": the path is too long for a socket");
    }
    std::memcpy(address.sun_path, path_.c_str(), path_.size());
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw ControlUnreachable(std::string("socket failed: ") + std::strerror(errno));
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
        const int error = errno;
        ::close(fd_);
        fd_ = -1;
        const bool absent = error == ENOENT || error == ECONNREFUSED;
        throw ControlUnreachable("cannot reach the supervisor at " + path_ + ": " + std::strerror(error) +
                                 (absent ? "; is it running with this --instance? (the socket's folder follows "
                                           "RUNTIME_DIRECTORY or XDG_RUNTIME_DIR as the supervisor's, or is the service's "
                                           "/run/comfy-supervisor/INSTANCE: docs/SECURITY.md)"
                                         : error == EACCES ? "; run comfyctl as the supervisor's user" : ""));
    }
}

ControlClient::~ControlClient() {
    if (fd_ >= 0) ::close(fd_);
}

void ControlClient::send(const ControlRequest& request) {
    const std::string line = request_line(request);
    std::size_t sent = 0;
    while (sent < line.size()) {
        const ssize_t n = ::send(fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw ControlUnreachable("sending to " + path_ + " failed: " + std::strerror(errno));
        sent += static_cast<std::size_t>(n);
    }
}

std::optional<std::string> ControlClient::read_line(std::optional<std::chrono::milliseconds> wait) {
    const auto deadline = std::chrono::steady_clock::now() + wait.value_or(std::chrono::milliseconds(0));
    for (;;) {
        if (const auto end = buffer_.find('\n'); end != std::string::npos) {
            std::string line = buffer_.substr(0, end);
            buffer_.erase(0, end + 1);
            return line;
        }
        if (buffer_.size() > kMaxAnswerLineBytes) {
            throw ControlUnreachable("the supervisor at " + path_ + " sent a line longer than " +
                                     std::to_string(kMaxAnswerLineBytes) + " bytes");
        }
        int timeout_ms = -1;
        if (wait) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) {
                timed_out_ = true;
                return std::nullopt;
            }
            timeout_ms = static_cast<int>(left.count());
        }
        pollfd readable{fd_, POLLIN, 0};
        const int ready = ::poll(&readable, 1, timeout_ms);
        if (ready < 0 && errno == EINTR) {
            interrupted_ = true;
            return std::nullopt;
        }
        if (ready < 0) throw ControlUnreachable(std::string("poll failed: ") + std::strerror(errno));
        if (ready == 0) continue;  // the deadline is checked above
        char chunk[4096];
        const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
        if (n < 0 && errno == EINTR) {
            interrupted_ = true;
            return std::nullopt;
        }
        // A reset after the last line (the supervisor closed with our bytes unread) is an end too.
        if (n == 0 || (n < 0 && errno == ECONNRESET)) return std::nullopt;
        if (n < 0) throw ControlUnreachable("reading from " + path_ + " failed: " + std::strerror(errno));
        buffer_.append(chunk, static_cast<std::size_t>(n));
    }
}

nlohmann::json ControlClient::answer(std::chrono::milliseconds wait) {
    const auto line = read_line(wait);
    if (!line) {
        throw ControlUnreachable(timed_out_ ? "the supervisor at " + path_ + " did not answer within " +
                                                  std::to_string(wait.count() / 1000) +
                                                  " s; is it stopped (SIGSTOP) or overloaded?"
                                            : "the supervisor at " + path_ + " closed the connection without an answer");
    }
    auto answer = nlohmann::json::parse(*line, nullptr, false);
    if (answer.is_discarded() || !answer.is_object() || !answer.contains("ok") || !answer["ok"].is_boolean()) {
        throw ControlUnreachable("the supervisor at " + path_ + " answered what is not an answer");
    }
    return answer;
}

}  // namespace comfy::ctl
