#include "shared/input_file.hpp"

#include "shared/byte_size.hpp"
#include "shared/json_errors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace comfy {

namespace {

// What a file that is not a regular one is, for "found ..." in a message.
std::string kind_of(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "a file of another kind";
}

std::string not_regular(mode_t mode) {
    return "expected a regular file, found " + kind_of(mode);
}

std::string too_large(std::uint64_t max_bytes, const std::string& found) {
    return "expected a file of at most " + format_byte_size_exact(max_bytes) + ", found " + found;
}

}  // namespace

InputFile::InputFile(std::string path, std::uint64_t max_bytes) : path_(std::move(path)), max_bytes_(max_bytes) {
    // Looked at before it is opened: opening a device can act on it (a watchdog starts,
    // a tape rewinds), and a FIFO's open waits for a writer.
    struct stat status {};
    if (::stat(path_.c_str(), &status) != 0) fail(system_message(errno));
    if (!S_ISREG(status.st_mode)) fail(not_regular(status.st_mode));
    // The name may have been replaced since: O_NONBLOCK keeps a FIFO's open from waiting,
    // and fstat on what was opened decides.
    fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd_ < 0) fail(system_message(errno));
    if (::fstat(fd_, &status) != 0) fail(system_message(errno));
    if (!S_ISREG(status.st_mode)) fail(not_regular(status.st_mode));
    if (static_cast<std::uint64_t>(status.st_size) > max_bytes_) {
        fail(too_large(max_bytes_, std::to_string(status.st_size) + " bytes"));
    }
}

InputFile::~InputFile() {
    if (fd_ >= 0) ::close(fd_);
}

void InputFile::fail(const std::string& why) const {
    // Only the constructor fails here, and the destructor does not run after it.
    if (fd_ >= 0) ::close(fd_);
    throw InputFileError(json_file_message(path_, "cannot read: " + why));
}

std::size_t InputFile::read(char* buffer, std::size_t size) {
    for (;;) {
        const ssize_t count = ::read(fd_, buffer, size);
        if (count < 0 && errno == EINTR) continue;
        if (count < 0) throw InputFileError(json_file_message(path_, "cannot read: " + system_message(errno)));
        bytes_read_ += static_cast<std::uint64_t>(count);
        // A regular file can still grow while it is read (a log being appended to).
        if (bytes_read_ > max_bytes_) {
            throw InputFileError(json_file_message(
                path_, "cannot read: " + too_large(max_bytes_, "more (it grew while being read)")));
        }
        return static_cast<std::size_t>(count);
    }
}

std::string read_input_file(const std::string& path, std::uint64_t max_bytes) {
    InputFile file(path, max_bytes);
    std::string text;
    char buffer[65536];
    while (const std::size_t count = file.read(buffer, sizeof buffer)) text.append(buffer, count);
    return text;
}

InputFileStream::InputFileStream(std::string path, std::uint64_t max_bytes)
    : std::istream(nullptr), file_(std::move(path), max_bytes), buffer_(file_) {
    rdbuf(&buffer_);
    exceptions(std::ios::badbit);
}

InputFileStream::Buffer::int_type InputFileStream::Buffer::underflow() {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    const std::size_t count = file_.read(bytes_, sizeof bytes_);
    if (count == 0) return traits_type::eof();
    setg(bytes_, bytes_, bytes_ + count);
    return traits_type::to_int_type(bytes_[0]);
}

}  // namespace comfy
