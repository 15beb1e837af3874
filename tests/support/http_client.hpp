#pragma once
// A plain HTTP/1.1 client over loopback for the tests of the supervisor's endpoints: one
// request per connection, as the server answers (it closes after each answer).

#include "tests/support/supervisor_process.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace comfy::test {

struct HttpAnswer {
    int status = 0;        // 0 when no answer came (refused, closed, or timed out)
    std::string headers;   // the status line and headers
    std::string body;
};

// Request headers, in order. A request is sent with "Host: 127.0.0.1" unless they name one.
using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// `method path` to 127.0.0.1:port with `body`; waits at most `timeout` for the whole answer.
HttpAnswer http_request(unsigned short port, const std::string& method, const std::string& path,
                        const std::string& body = {}, std::chrono::milliseconds timeout = std::chrono::seconds(30));
// The same with `headers`, as a browser or any other client would send them.
HttpAnswer http_request_with(unsigned short port, const std::string& method, const std::string& path,
                             const HttpHeaders& headers, const std::string& body = {});

// The port a supervisor configured with "listen": "127.0.0.1:0" logged ("http: listening on
// 127.0.0.1:PORT"), waiting for the line up to `timeout`; nothing on time-out.
std::optional<unsigned short> http_port(const SupervisorProcess& supervisor,
                                        std::chrono::milliseconds timeout = std::chrono::seconds(30));

// A connection opened and left idle, or sent only what the test sends; closed when the
// object goes. `source` is the loopback address it connects from (any of 127.0.0.0/8):
// another source is another client to the server.
class IdleConnection {
public:
    explicit IdleConnection(unsigned short port, const std::string& source = "127.0.0.1");
    ~IdleConnection();
    IdleConnection(const IdleConnection&) = delete;
    IdleConnection& operator=(const IdleConnection&) = delete;
    bool connected() const noexcept { return connected_; }
    bool send(const std::string& bytes);
    // What the server sent until it closed the connection, waiting at most `timeout`;
    // nothing when it did not close it in time.
    std::optional<std::string> until_closed(std::chrono::milliseconds timeout = std::chrono::seconds(30));

private:
    int fd_ = -1;
    bool connected_ = false;
};

}  // namespace comfy::test
