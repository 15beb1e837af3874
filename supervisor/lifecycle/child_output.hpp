#pragma once
// A child's stdout and stderr, read through one pipe and logged line by line under its
// pack's name ("host: Starting server"), so an operator and the journal can tell ComfyUI's
// lines from a worker's and from the supervisor's own. A child cannot forge a supervisor
// line: each of its lines is prefixed, and control characters are shown as '?'.
//
// One per life. It reads on the supervisor's loop until the pipe's end of file, which
// comes once the life's process group is gone, and keeps itself alive until then.

#include "ipc/unique_fd.hpp"
#include "supervisor/ops/log/journal_fields.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <array>
#include <memory>
#include <string>

namespace comfy::supervisor {

class ChildOutput : public std::enable_shared_from_this<ChildOutput> {
public:
    // Longer lines are logged in pieces of this many bytes.
    static constexpr std::size_t kLineBytes = 8192;

    // `about`: the life whose output it is (its pack's name, slot and generation). Throws
    // std::system_error when no pipe can be made.
    static std::shared_ptr<ChildOutput> open(boost::asio::io_context& io, LogFields about);

    // The child's stdout and stderr, close-on-exec here (the spawner dups it).
    int write_end() const noexcept { return write_end_.get(); }
    // Once the child is spawned: closes our copy of the write end and starts reading.
    void start();
    // Logs the whole lines the pipe holds now, without waiting: at the child's exit, before
    // the exit is told, so that last_line() has what it wrote before it ended.
    void catch_up();
    // catch_up(), then a partial last line: at shutdown, once the loop has stopped.
    void drain_now();
    // The last line it wrote that was not blank (its unended last piece, when it has one),
    // at most kLastLineBytes of it; empty while it wrote none. What a pack that cannot run
    // ends with says why (pack_worker's "cannot import ..."), for the event that says it failed.
    std::string last_line() const;
    static constexpr std::size_t kLastLineBytes = 400;

private:
    ChildOutput(boost::asio::io_context& io, LogFields about, int read_end, int write_end);
    void read();
    void take(const char* data, std::size_t size);
    void flush_partial();
    void log_line_of_child(std::string line);

    LogFields about_;
    boost::asio::posix::stream_descriptor pipe_;
    ipc::UniqueFd write_end_;
    std::array<char, 16384> buffer_{};
    std::string partial_;    // a line not ended yet
    std::string last_line_;  // the last one logged that was not blank
};

}  // namespace comfy::supervisor
