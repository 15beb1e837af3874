#pragma once
// What the ComfyUI host may ask of the supervisor on its bridge control socket (the
// packs' ends stay shut for reading): to end a pack's life that it cannot end itself,
// because the host only talks to the worker and a worker that does not listen cannot be
// told (docs/PACKS.md, "A node call"). Each request is one datagram of a JSON object:
//
//   {"request": "end_pack", "pack": NAME, "generation": G, "cause": CAUSE, "detail": TEXT}
//
// CAUSE "cancel": the pack's node was still running cancel_grace_ms after ComfyUI's
// Cancel; its worker is stopped and started again at once, as after an operator's
// restart, not counted as a crash. CAUSE "cancel_callback": the same for a function of the
// pack's that the host called back (a CFG function under its sampler) and still waited on.
// CAUSE "broken_session": the call session with that life broke (the worker broke the
// protocol, or closed its socket and lives on); it is stopped and restarted as after a crash. TEXT (at most 200 bytes) says what, for the log.
//
// A request about a life that has ended, or is being stopped already, is moot and
// ignored; a malformed one is refused in one line of the log (rate-limited). The host is
// no more trusted than its user: it could signal the worker itself. Descriptors attached
// to a datagram are closed unread.

#include "supervisor/lifecycle/worker_access.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <optional>
#include <string_view>

namespace comfy::supervisor {

class HostRequests {
public:
    HostRequests(boost::asio::io_context& io, WorkerAccess& lives);

    // Reads a new host life's requests on `control` (the supervisor's end of its control
    // socket, which stays the caller's; a duplicate is read here), until stop().
    void listen(int control);
    void stop();

    // Acts on one datagram from the host.
    void handle(std::string_view datagram);

private:
    void wait();
    void refuse(const std::string& why);

    boost::asio::io_context& io_;
    WorkerAccess& lives_;
    std::optional<boost::asio::posix::stream_descriptor> socket_;
};

}  // namespace comfy::supervisor
