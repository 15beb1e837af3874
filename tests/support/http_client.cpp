#include "tests/support/http_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <regex>

namespace comfy::test {

namespace {

int connect_loopback(unsigned short port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
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

}  // namespace

HttpAnswer http_request(unsigned short port, const std::string& method, const std::string& path,
                        const std::string& body, std::chrono::milliseconds timeout) {
    const int fd = connect_loopback(port);
    if (fd < 0) return {};
    const std::string request = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
                                std::to_string(body.size()) + "\r\n\r\n" + body;
    std::string response;
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        char buffer[4096];
        for (;;) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            pollfd wait{fd, POLLIN, 0};
            if (left.count() <= 0 || ::poll(&wait, 1, static_cast<int>(left.count())) <= 0) {
                response.clear();  // no whole answer in time
                break;
            }
            const ssize_t n = ::read(fd, buffer, sizeof buffer);
            if (n <= 0) break;
            response.append(buffer, static_cast<std::size_t>(n));
        }
    }
    ::close(fd);
    return parse(response);
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

IdleConnection::IdleConnection(unsigned short port) : fd_(connect_loopback(port)), connected_(fd_ >= 0) {}

IdleConnection::~IdleConnection() {
    if (fd_ >= 0) ::close(fd_);
}

}  // namespace comfy::test
