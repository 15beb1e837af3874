#include "tests/bench/os_baselines.hpp"

#include "tests/bench/bench_error.hpp"
#include "tests/bench/message.hpp"
#include "tests/bench/shared_mapping.hpp"

#include "ipc/spsc_ring.hpp"  // cpu_relax

#include <boost/interprocess/ipc/message_queue.hpp>

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <string>
#include <utility>

namespace comfy::bench {

namespace {

namespace bi = boost::interprocess;

constexpr std::string_view kSharedWordFloor = "shared word floor";
constexpr std::string_view kEventfd = "eventfd";
constexpr std::string_view kUnixSocket = "unix socket";
constexpr std::string_view kPipe = "pipe";
constexpr std::string_view kBoostMessageQueue = "boost message_queue";

constexpr std::string_view kRetryAdvice = "rerun, and report it if it repeats";
constexpr std::string_view kDescriptorAdvice = "raise the open-file limit (ulimit -n) and rerun";

class OwnedFd {
public:
    explicit OwnedFd(int fd) noexcept : fd_(fd) {}
    ~OwnedFd() {
        if (fd_ >= 0) ::close(fd_);
    }
    OwnedFd(OwnedFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    OwnedFd& operator=(OwnedFd&&) = delete;
    OwnedFd(const OwnedFd&) = delete;
    OwnedFd& operator=(const OwnedFd&) = delete;

    int get() const noexcept { return fd_; }

private:
    int fd_;
};

void write_exactly(int fd, const void* data, std::size_t size, std::string_view measurement) {
    const auto* bytes = static_cast<const std::byte*>(data);
    while (size > 0) {
        const ssize_t written = ::write(fd, bytes, size);
        if (written >= 0) {
            bytes += written;
            size -= static_cast<std::size_t>(written);
        } else if (errno != EINTR) {
            throw_errno(std::string(measurement) + ": write", kRetryAdvice);
        }
    }
}

void read_exactly(int fd, void* data, std::size_t size, std::string_view measurement) {
    auto* bytes = static_cast<std::byte*>(data);
    while (size > 0) {
        const ssize_t got = ::read(fd, bytes, size);
        if (got > 0) {
            bytes += got;
            size -= static_cast<std::size_t>(got);
        } else if (got == 0) {
            throw BenchError(std::string(measurement) + ": the other side closed its end mid-message; " +
                             std::string(kRetryAdvice));
        } else if (errno != EINTR) {
            throw_errno(std::string(measurement) + ": read", kRetryAdvice);
        }
    }
}

// ---- the floor: one shared word ----

class SharedWordEndpoint {
public:
    SharedWordEndpoint(std::atomic<std::uint64_t>& word, bool is_initiator) noexcept
        : word_(word), is_initiator_(is_initiator) {}

    // The initiator writes 2s+1 for message s and the peer answers 2s+2: the word never
    // repeats a value, its parity says whose turn it is, and (value-1)/2 gives s back.
    void send(const Message64& message) noexcept {
        // Release: as a real hand-off must, publishes everything written before the value.
        word_.store(2 * message.sequence + (is_initiator_ ? 1 : 2), std::memory_order_release);
    }

    void receive(Message64& message) noexcept {
        const std::uint64_t awaited_parity = is_initiator_ ? 0 : 1;
        std::uint64_t value = 0;
        // Acquire: pairs with the other side's release store.
        while (((value = word_.load(std::memory_order_acquire)) & 1) != awaited_parity) ipc::cpu_relax();
        message.sequence = (value - 1) / 2;
    }

private:
    std::atomic<std::uint64_t>& word_;
    bool is_initiator_;
};

class SharedWordChannel {
public:
    SharedWordChannel() : memory_(kCacheLine), word_(*new (memory_.data()) std::atomic<std::uint64_t>(0)) {}

    SharedWordEndpoint initiator() noexcept { return {word_, true}; }
    SharedWordEndpoint peer() noexcept { return {word_, false}; }

private:
    SharedMapping memory_;
    std::atomic<std::uint64_t>& word_;
};

// ---- eventfd ----

OwnedFd make_blocking_eventfd() {
    const int fd = ::eventfd(0, EFD_CLOEXEC);
    if (fd < 0) throw_errno("eventfd", kDescriptorAdvice);
    return OwnedFd(fd);
}

class EventfdEndpoint {
public:
    EventfdEndpoint(int outgoing, int incoming) noexcept : outgoing_(outgoing), incoming_(incoming) {}

    // The counter carries sequence + 1, because writing 0 would not wake the reader.
    void send(const Message64& message) {
        const std::uint64_t value = message.sequence + 1;
        write_exactly(outgoing_, &value, sizeof value, kEventfd);
    }
    void receive(Message64& message) {
        std::uint64_t value = 0;
        read_exactly(incoming_, &value, sizeof value, kEventfd);
        message.sequence = value - 1;
    }

private:
    int outgoing_;
    int incoming_;
};

class EventfdChannel {
public:
    EventfdEndpoint initiator() const noexcept { return {ping_.get(), pong_.get()}; }
    EventfdEndpoint peer() const noexcept { return {pong_.get(), ping_.get()}; }

private:
    OwnedFd ping_ = make_blocking_eventfd();
    OwnedFd pong_ = make_blocking_eventfd();
};

// ---- byte streams: Unix socket and pipes ----

// Sends and receives the whole 64-byte message over blocking descriptors.
class ByteStreamEndpoint {
public:
    ByteStreamEndpoint(int outgoing, int incoming, std::string_view measurement) noexcept
        : outgoing_(outgoing), incoming_(incoming), measurement_(measurement) {}

    void send(const Message64& message) { write_exactly(outgoing_, &message, sizeof message, measurement_); }
    void receive(Message64& message) { read_exactly(incoming_, &message, sizeof message, measurement_); }

private:
    int outgoing_;
    int incoming_;
    std::string_view measurement_;
};

struct DescriptorPair {
    OwnedFd first;
    OwnedFd second;
};

DescriptorPair make_unix_socket_pair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) throw_errno("socketpair", kDescriptorAdvice);
    return {OwnedFd(fds[0]), OwnedFd(fds[1])};
}

// first: the read end, second: the write end.
DescriptorPair make_pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno("pipe", kDescriptorAdvice);
    return {OwnedFd(fds[0]), OwnedFd(fds[1])};
}

class UnixSocketChannel {
public:
    // A socket is bidirectional: each side reads and writes its own end.
    ByteStreamEndpoint initiator() const noexcept { return {ends_.first.get(), ends_.first.get(), kUnixSocket}; }
    ByteStreamEndpoint peer() const noexcept { return {ends_.second.get(), ends_.second.get(), kUnixSocket}; }

private:
    DescriptorPair ends_ = make_unix_socket_pair();
};

class PipeChannel {
public:
    ByteStreamEndpoint initiator() const noexcept { return {ping_.second.get(), pong_.first.get(), kPipe}; }
    ByteStreamEndpoint peer() const noexcept { return {pong_.second.get(), ping_.first.get(), kPipe}; }

private:
    DescriptorPair ping_ = make_pipe();
    DescriptorPair pong_ = make_pipe();
};

// ---- Boost.Interprocess message_queue ----

class MessageQueueEndpoint {
public:
    MessageQueueEndpoint(bi::message_queue& outgoing, bi::message_queue& incoming) noexcept
        : outgoing_(outgoing), incoming_(incoming) {}

    void send(const Message64& message) { outgoing_.send(&message, sizeof message, 0); }
    void receive(Message64& message) {
        bi::message_queue::size_type received = 0;
        unsigned int priority = 0;
        incoming_.receive(&message, sizeof message, received, priority);
        if (received != sizeof message) {
            throw BenchError(std::string(kBoostMessageQueue) + ": delivered " + std::to_string(received) +
                             " bytes instead of 64, which is a bug: report it");
        }
    }

private:
    bi::message_queue& outgoing_;
    bi::message_queue& incoming_;
};

// Removes the named queues from /dev/shm when it goes out of scope, however that happens.
class QueueNamesRemover {
public:
    QueueNamesRemover(const std::string& first, const std::string& second) noexcept : first_(first), second_(second) {}
    ~QueueNamesRemover() {
        bi::message_queue::remove(first_.c_str());
        bi::message_queue::remove(second_.c_str());
    }
    QueueNamesRemover(const QueueNamesRemover&) = delete;
    QueueNamesRemover& operator=(const QueueNamesRemover&) = delete;

private:
    const std::string& first_;
    const std::string& second_;
};

class MessageQueueChannel {
public:
    MessageQueueChannel() {
        const std::string stem = "comfy-bench-mq-" + std::to_string(::getpid());
        const std::string ping_name = stem + "-ping";
        const std::string pong_name = stem + "-pong";
        // The names go as soon as both queues exist (or creating one fails): each queue
        // lives on in the mapping that both processes inherit across fork, and /dev/shm
        // is left clean even if the run is killed.
        const QueueNamesRemover remover(ping_name, pong_name);
        try {
            ping_.emplace(bi::create_only, ping_name.c_str(), kOneInFlight, sizeof(Message64));
            pong_.emplace(bi::create_only, pong_name.c_str(), kOneInFlight, sizeof(Message64));
        } catch (const bi::interprocess_exception& error) {
            throw BenchError(std::string("creating a Boost.Interprocess message_queue in /dev/shm failed: ") +
                             error.what() + "; check that /dev/shm is mounted, writable and not full");
        }
    }

    MessageQueueEndpoint initiator() noexcept { return {*ping_, *pong_}; }
    MessageQueueEndpoint peer() noexcept { return {*pong_, *ping_}; }

private:
    // A ping-pong never has more than one message in a queue.
    static constexpr bi::message_queue::size_type kOneInFlight = 1;
    std::optional<bi::message_queue> ping_;
    std::optional<bi::message_queue> pong_;
};

}  // namespace

LatencySummary measure_shared_word_floor(const RoundTripPlan& plan, const CpuPlacement& cpus) {
    SharedWordChannel channel;
    return measure_round_trips(kSharedWordFloor, channel, plan, cpus);
}

LatencySummary measure_eventfd_ping_pong(const RoundTripPlan& plan, const CpuPlacement& cpus) {
    EventfdChannel channel;
    return measure_round_trips(kEventfd, channel, plan, cpus);
}

LatencySummary measure_unix_socket_ping_pong(const RoundTripPlan& plan, const CpuPlacement& cpus) {
    UnixSocketChannel channel;
    return measure_round_trips(kUnixSocket, channel, plan, cpus);
}

LatencySummary measure_pipe_ping_pong(const RoundTripPlan& plan, const CpuPlacement& cpus) {
    PipeChannel channel;
    return measure_round_trips(kPipe, channel, plan, cpus);
}

LatencySummary measure_boost_message_queue_ping_pong(const RoundTripPlan& plan, const CpuPlacement& cpus) {
    MessageQueueChannel channel;
    return measure_round_trips(kBoostMessageQueue, channel, plan, cpus);
}

}  // namespace comfy::bench
