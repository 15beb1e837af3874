#include "supervisor/lifecycle/child_output.hpp"

#include "supervisor/ops/log/log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <system_error>

namespace comfy::supervisor {

std::shared_ptr<ChildOutput> ChildOutput::open(boost::asio::io_context& io, LogFields about) {
    int ends[2];
    if (::pipe2(ends, O_CLOEXEC | O_NONBLOCK) != 0) {
        throw std::system_error(errno, std::generic_category(), "a pipe for its output");
    }
    // The child's end blocks: a child that writes faster than we log waits, as it would on
    // a terminal, rather than failing its writes.
    ::fcntl(ends[1], F_SETFL, 0);
    return std::shared_ptr<ChildOutput>(new ChildOutput(io, std::move(about), ends[0], ends[1]));
}

ChildOutput::ChildOutput(boost::asio::io_context& io, LogFields about, int read_end, int write_end)
    : about_(std::move(about)), pipe_(io, read_end), write_end_(write_end) {}

void ChildOutput::start() {
    write_end_.reset();
    read();
}

void ChildOutput::read() {
    pipe_.async_read_some(boost::asio::buffer(buffer_),
                          [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
                              self->take(self->buffer_.data(), n);
                              if (!ec) {
                                  self->read();
                              } else if (ec != boost::asio::error::operation_aborted) {
                                  self->flush_partial();  // end of file: the group is gone
                              }
                          });
}

void ChildOutput::drain_now() {
    if (!pipe_.is_open()) return;
    for (;;) {
        const ssize_t n = ::read(pipe_.native_handle(), buffer_.data(), buffer_.size());
        if (n <= 0) break;
        take(buffer_.data(), static_cast<std::size_t>(n));
    }
    flush_partial();
}

void ChildOutput::take(const char* data, std::size_t size) {
    for (std::size_t i = 0; i < size; ++i) {
        const char c = data[i];
        if (c == '\n') {
            log_child_line(about_, partial_);
            partial_.clear();
            continue;
        }
        const auto byte = static_cast<unsigned char>(c);
        partial_.push_back(byte < 0x20 && c != '\t' ? '?' : byte == 0x7f ? '?' : c);
        if (partial_.size() == kLineBytes) {
            log_child_line(about_, partial_);
            partial_.clear();
        }
    }
}

void ChildOutput::flush_partial() {
    if (partial_.empty()) return;
    log_child_line(about_, partial_);
    partial_.clear();
}

}  // namespace comfy::supervisor
