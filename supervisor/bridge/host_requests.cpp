#include "supervisor/bridge/host_requests.hpp"

#include "supervisor/ctl/control_protocol.hpp"

#include <fcntl.h>
#include <sys/socket.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace comfy::supervisor {

namespace {

constexpr std::size_t kMaxRequestBytes = 4096;
constexpr std::size_t kMaxDetailBytes = 200;
// Read in one turn of the loop at most; the rest at the next, so that a host that floods
// its socket cannot hold the loop.
constexpr int kRequestsPerTurn = 64;

WorkerProcess* python_pack(const std::vector<std::unique_ptr<WorkerProcess>>& workers, const std::string& name) {
    const auto found = std::find_if(workers.begin(), workers.end(), [&](const auto& w) {
        return w->kind == ParticipantKind::worker && w->pack.python && w->pack.name == name;
    });
    return found == workers.end() ? nullptr : found->get();
}

}  // namespace

HostRequests::HostRequests(boost::asio::io_context& io, WorkerAccess& lives) : io_(io), lives_(lives) {}

void HostRequests::listen(int control) {
    stop();
    const int own = ::fcntl(control, F_DUPFD_CLOEXEC, 0);
    if (own < 0) {
        log_warning(std::string("host: cannot read its bridge requests: ") + std::strerror(errno));
        return;
    }
    socket_.emplace(io_, own);
    wait();
}

void HostRequests::stop() {
    socket_.reset();  // cancels the wait and closes our duplicate
}

void HostRequests::wait() {
    socket_->async_wait(boost::asio::posix::stream_descriptor::wait_read, [this](const boost::system::error_code& ec) {
        if (ec || !socket_) return;
        std::array<char, kMaxRequestBytes> buffer;
        for (int turn = 0; turn < kRequestsPerTurn; ++turn) {
            // No control buffer: descriptors the host attached are closed by the kernel.
            const ssize_t length = ::recv(socket_->native_handle(), buffer.data(), buffer.size(), MSG_DONTWAIT | MSG_TRUNC);
            if (length < 0 && (errno == EAGAIN || errno == EINTR)) break;
            if (length <= 0) {  // the host life's end closed: its next life gets a new socket
                stop();
                return;
            }
            if (static_cast<std::size_t>(length) > buffer.size()) {
                refuse("a request of " + std::to_string(length) + " bytes (at most " +
                       std::to_string(kMaxRequestBytes) + ")");
                continue;
            }
            handle(std::string_view(buffer.data(), static_cast<std::size_t>(length)));
            if (!socket_) return;
        }
        wait();
    });
}

void HostRequests::handle(std::string_view datagram) {
    const auto request = nlohmann::json::parse(datagram, nullptr, false);
    if (!request.is_object() || !request.contains("request") || request["request"] != "end_pack") {
        refuse("not a JSON object whose request is end_pack");
        return;
    }
    const auto pack = request.find("pack");
    const auto generation = request.find("generation");
    const auto cause = request.find("cause");
    const auto detail = request.find("detail");
    if (pack == request.end() || !pack->is_string() || generation == request.end() ||
        !generation->is_number_unsigned() || cause == request.end() || !cause->is_string() ||
        (detail != request.end() && !detail->is_string())) {
        refuse("an end_pack request without a pack, generation and cause of their types");
        return;
    }
    const std::string why = detail == request.end() ? std::string() : ctl::printable(detail->get<std::string>(), kMaxDetailBytes);
    const std::string cause_text = cause->get<std::string>();
    const bool callback = cause_text == "cancel_callback";
    const bool cancel = cause_text == "cancel" || callback;
    if (!cancel && cause_text != "broken_session") {
        refuse("an end_pack request of cause " + ctl::printable(cause_text) +
               ", not cancel, cancel_callback or broken_session");
        return;
    }
    WorkerProcess* const worker = python_pack(lives_.workers(), pack->get<std::string>());
    if (worker == nullptr) {
        refuse("an end_pack request for " + ctl::printable(pack->get<std::string>()) + ", no pack in the python form");
        return;
    }
    // Moot: that life is over, or being stopped already (an operator's stop or restart
    // keeps its intent), or everything is shutting down.
    if (lives_.shutting_down() || worker->generation != generation->get<std::uint64_t>() || !worker->alive() ||
        worker->exited() || !worker->kill_reason.empty() || worker->operator_intent != OperatorIntent::none) {
        return;
    }
    if (cancel) {
        worker->operator_intent = OperatorIntent::cancelled;
        lives_.terminate(*worker, std::string(callback ? "its callback" : "its node") + " did not end within " +
                                      std::to_string(worker->pack.python->cancel_grace.count()) +
                                      " ms of ComfyUI's Cancel" + (why.empty() ? "" : " (" + why + ")"));
    } else {
        lives_.terminate(*worker, "its call session with the host broke: " + (why.empty() ? std::string("no detail") : why));
    }
}

void HostRequests::refuse(const std::string& why) {
    for (const auto& worker : lives_.workers()) {
        if (worker->kind == ParticipantKind::host) {
            lives_.log_about(*worker, "bridge requests", "host: refused a bridge request: " + why);
            return;
        }
    }
}

}  // namespace comfy::supervisor
