#pragma once
// comfyctl's end of the control socket: connects to the instance's socket, sends one
// request, reads the answer's lines.

#include "supervisor/ctl/control_protocol.hpp"

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

namespace comfy::ctl {

// The supervisor could not be reached, did not answer in time, or answered what is not
// an answer; what() is one line saying what to do.
class ControlUnreachable : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class ControlClient {
public:
    // Connects to the instance's control socket. Throws ControlUnreachable.
    explicit ControlClient(const std::string& instance);
    ~ControlClient();
    ControlClient(const ControlClient&) = delete;
    ControlClient& operator=(const ControlClient&) = delete;

    void send(const ControlRequest& request);
    // The next line, its newline removed; nothing once the supervisor ended the
    // connection, or when `wait` is given and passes first (then timed_out() is true), or
    // when a signal interrupted the wait (Ctrl-C while following). Throws ControlUnreachable
    // for a line over kMaxAnswerLineBytes or a failed read.
    std::optional<std::string> read_line(std::optional<std::chrono::milliseconds> wait);
    bool timed_out() const noexcept { return timed_out_; }
    bool interrupted() const noexcept { return interrupted_; }

    // The first answer line, read within `wait`, as JSON; throws ControlUnreachable when
    // none came or it is not an answer.
    nlohmann::json answer(std::chrono::milliseconds wait);

private:
    std::string path_;
    int fd_ = -1;
    std::string buffer_;
    bool timed_out_ = false;
    bool interrupted_ = false;
};

}  // namespace comfy::ctl
