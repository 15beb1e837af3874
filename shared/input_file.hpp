#pragma once
// Files named on the command line (configs, workloads, traces), opened so that no such
// name can block, crash or exhaust the machine: only a regular file is read (a FIFO would
// block forever, /dev/zero never ends, a device may act on being opened), and never more
// than a cap given by the caller. The caps are documented with each format (CONFIG.md,
// TRACE.md).

#include <cstddef>
#include <cstdint>
#include <istream>
#include <stdexcept>
#include <streambuf>
#include <string>

namespace comfy {

// One line, starting with the file name: "<file>: cannot read: <why>".
class InputFileError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Configs, workloads and pack descriptions: a real one is a few KiB; the cap keeps what a
// parser builds from a wrong file within a few hundred MiB.
inline constexpr std::uint64_t kMaxJsonFileBytes = std::uint64_t{16} << 20;

// An open regular file that yields at most `max_bytes`. Throws InputFileError when the
// path cannot be opened, is not a regular file, or holds (or grows to) more than the cap.
class InputFile {
public:
    InputFile(std::string path, std::uint64_t max_bytes);
    ~InputFile();
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;

    // Up to `size` bytes into `buffer`; 0 at the end of the file.
    std::size_t read(char* buffer, std::size_t size);

    const std::string& path() const noexcept { return path_; }
    // What was opened, for a caller that also judges its owner or mode (fstat).
    int descriptor() const noexcept { return fd_; }

private:
    [[noreturn]] void fail(const std::string& why) const;

    std::string path_;
    std::uint64_t max_bytes_;
    std::uint64_t bytes_read_ = 0;
    int fd_ = -1;
};

// The whole file, as InputFile reads it.
std::string read_input_file(const std::string& path, std::uint64_t max_bytes);

// An input stream over an InputFile, for readers that go line by line. Its exception mask
// has badbit, so an InputFileError raised while reading (an I/O error, the cap) leaves
// the reading call as itself rather than as a silent bad() stream.
class InputFileStream : public std::istream {
public:
    InputFileStream(std::string path, std::uint64_t max_bytes);

private:
    class Buffer : public std::streambuf {
    public:
        explicit Buffer(InputFile& file) : file_(file) {}

    protected:
        int_type underflow() override;

    private:
        InputFile& file_;
        char bytes_[65536];
    };

    InputFile file_;
    Buffer buffer_;
};

}  // namespace comfy
