#pragma once
// The operator's HTTP endpoints on the supervisor's own event loop (Boost.Beast):
//   GET  /census    workers, census, ledger and device, as JSON (what comfyctl shows)
//   GET  /metrics   the same figures in Prometheus text format, for fleets
//   POST /free      every worker releases what it holds (as ComfyUI's /free)
// One request per connection; every answer closes it. Off unless the config names a
// listen address.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <functional>
#include <string>

namespace comfy::supervisor {

struct OpsHandlers {
    std::function<std::string()> census_json;
    std::function<std::string()> metrics_text;
    std::function<void()> free_everything;
};

class OpsHttpServer {
public:
    // Binds `address:port` (port 0: any free port). Throws std::system_error on failure.
    OpsHttpServer(boost::asio::io_context& io, const std::string& address, unsigned short port, OpsHandlers handlers);

    unsigned short port() const;
    void start();
    void stop();

private:
    void accept();

    boost::asio::ip::tcp::acceptor acceptor_;
    OpsHandlers handlers_;
};

}  // namespace comfy::supervisor
