#include "tests/support/http_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <regex>

namespace comfy::test {

namespace {

int connect_loopback(unsigned short port, const std::string& source = "127.0.0.1") {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_in from{};
    from.sin_family = AF_INET;
    if (::inet_pton(AF_INET, source.c_str(), &from.sin_addr) != 1 ||
        ::bind(fd, reinterpret_cast<const sockaddr*>(&from), sizeof from) != 0) {
        ::close(fd);
        return -1;
    }
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

HttpAnswer parse(const std::string& response) {
    HttpAnswer answer;
    const auto end = response.find("\r\n\r\n");
    if (response.rfind("HTTP/1.", 0) != 0 || end == std::string::npos) return answer;
    answer.status = std::stoi(response.substr(9, 3));
    answer.headers = response.substr(0, end);
    answer.body = response.substr(end + 4);
    return answer;
}

// What `fd` receives until its peer closes it; nothing when that takes past `timeout`.
std::optional<std::string> read_until_closed(int fd, std::chrono::milliseconds timeout) {
    std::string received;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buffer[4096];
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        pollfd wait{fd, POLLIN, 0};
        if (left.count() <= 0 || ::poll(&wait, 1, static_cast<int>(left.count())) <= 0) return std::nullopt;
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n <= 0) return received;
        received.append(buffer, static_cast<std::size_t>(n));
    }
}

HttpAnswer exchange(unsigned short port, const std::string& request, std::chrono::milliseconds timeout) {
    const int fd = connect_loopback(port);
    if (fd < 0) return {};
    std::optional<std::string> response;
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
        response = read_until_closed(fd, timeout);
    }
    ::close(fd);
    return response ? parse(*response) : HttpAnswer{};
}

}  // namespace

HttpAnswer http_request(unsigned short port, const std::string& method, const std::string& path,
                        const std::string& body, std::chrono::milliseconds timeout) {
    return exchange(port,
                    method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n" + body,
                    timeout);
}

HttpAnswer http_request_with(unsigned short port, const std::string& method, const std::string& path,
                             const HttpHeaders& headers, const std::string& body) {
    std::string head = method + " " + path + " HTTP/1.1\r\n";
    bool host = false;
    for (const auto& [name, value] : headers) {
        head += name + ": " + value + "\r\n";
        host = host || name == "Host";
    }
    if (!host) head += "Host: 127.0.0.1\r\n";
    return exchange(port, head + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body,
                    std::chrono::seconds(30));
}

std::optional<unsigned short> http_port(const SupervisorProcess& supervisor, std::chrono::milliseconds timeout) {
    std::optional<unsigned short> port;
    eventually(
        [&] {
            std::smatch found;
            const std::string log = supervisor.log();
            if (!std::regex_search(log, found, std::regex("http: listening on 127\\.0\\.0\\.1:([0-9]+)"))) return false;
            port = static_cast<unsigned short>(std::stoi(found[1].str()));
            return true;
        },
        timeout);
    return port;
}

IdleConnection::IdleConnection(unsigned short port, const std::string& source)
    : fd_(connect_loopback(port, source)), connected_(fd_ >= 0) {}

bool IdleConnection::send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

std::optional<std::string> IdleConnection::until_closed(std::chrono::milliseconds timeout) {
    return read_until_closed(fd_, timeout);
}

IdleConnection::~IdleConnection() {
    if (fd_ >= 0) ::close(fd_);
}

}  // namespace comfy::test
