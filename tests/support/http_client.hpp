#pragma once
// A plain HTTP/1.1 client over loopback for the tests of the supervisor's endpoints: one
// request per connection, as the server answers (it closes after each answer).

#include "tests/support/supervisor_process.hpp"

#include <chrono>
#include <optional>
#include <string>

namespace comfy::test {

struct HttpAnswer {
    int status = 0;        // 0 when no answer came (refused, closed, or timed out)
    std::string headers;   // the status line and headers
    std::string body;
};

// `method path` to 127.0.0.1:port with `body`; waits at most `timeout` for the whole answer.
HttpAnswer http_request(unsigned short port, const std::string& method, const std::string& path,
                        const std::string& body = {}, std::chrono::milliseconds timeout = std::chrono::seconds(30));

// The port a supervisor configured with "listen": "127.0.0.1:0" logged ("http: listening on
// 127.0.0.1:PORT"), waiting for the line up to `timeout`; nothing on time-out.
std::optional<unsigned short> http_port(const SupervisorProcess& supervisor,
                                        std::chrono::milliseconds timeout = std::chrono::seconds(30));

// A connection opened and left idle; closed when the object goes.
class IdleConnection {
public:
    explicit IdleConnection(unsigned short port);
    ~IdleConnection();
    IdleConnection(const IdleConnection&) = delete;
    IdleConnection& operator=(const IdleConnection&) = delete;
    bool connected() const noexcept { return connected_; }

private:
    int fd_ = -1;
    bool connected_ = false;
};

}  // namespace comfy::test
