#include "supervisor/lifecycle/child_output.hpp"

#include "supervisor/ops/log/log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <system_error>
#include <utility>

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

void ChildOutput::catch_up() {
    if (!pipe_.is_open()) return;
    for (;;) {
        const ssize_t n = ::read(pipe_.native_handle(), buffer_.data(), buffer_.size());
        if (n <= 0) break;
        take(buffer_.data(), static_cast<std::size_t>(n));
    }
}

void ChildOutput::drain_now() {
    catch_up();
    flush_partial();
}

std::string ChildOutput::last_line() const {
    std::string line = partial_.find_first_not_of(" \t") != std::string::npos ? partial_ : last_line_;
    if (line.size() > kLastLineBytes) {
        // Cut where a character starts: the line may be UTF-8, and is shown as such.
        std::size_t cut = kLastLineBytes;
        while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
        line.resize(cut);
        line += "...";
    }
    return line;
}

void ChildOutput::log_line_of_child(std::string line) {
    log_child_line(about_, line);
    if (line.find_first_not_of(" \t") != std::string::npos) last_line_ = std::move(line);
}

void ChildOutput::take(const char* data, std::size_t size) {
    for (std::size_t i = 0; i < size; ++i) {
        const char c = data[i];
        if (c == '\n') {
            log_line_of_child(std::exchange(partial_, {}));
            continue;
        }
        const auto byte = static_cast<unsigned char>(c);
        partial_.push_back(byte < 0x20 && c != '\t' ? '?' : byte == 0x7f ? '?' : c);
        if (partial_.size() == kLineBytes) log_line_of_child(std::exchange(partial_, {}));
    }
}

void ChildOutput::flush_partial() {
    if (partial_.empty()) return;
    log_line_of_child(std::exchange(partial_, {}));
}

}  // namespace comfy::supervisor
