// The supervisor under a systemd that wants notifications (Type=notify, WatchdogSec): the
// test is systemd, a datagram socket named by NOTIFY_SOCKET, and reads what the real
// supervisor sends through libsystemd's sd_notify.
#include <catch2/catch.hpp>

#include "tests/support/supervisor_process.hpp"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

using namespace comfy;
using namespace comfy::test;
using nlohmann::json;

namespace {

// The notification socket, bound in `folder`, named to children through NOTIFY_SOCKET and
// with a watchdog of `watchdog_us` through WATCHDOG_USEC, both set in this test's process
// (each test case runs in a process of its own) for the supervisor to inherit.
class NotifySocket {
public:
    NotifySocket(const TempFolder& folder, unsigned watchdog_us) {
        fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd_ < 0) throw std::runtime_error("socket failed");
        const auto path = (folder.path() / "notify").string();
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        if (path.size() >= sizeof address.sun_path) throw std::runtime_error("socket path too long: " + path);
        std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
        if (::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
            throw std::runtime_error("bind " + path + ": " + std::strerror(errno));
        }
        ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
        ::setenv("WATCHDOG_USEC", std::to_string(watchdog_us).c_str(), 1);
    }
    ~NotifySocket() {
        ::unsetenv("NOTIFY_SOCKET");
        ::unsetenv("WATCHDOG_USEC");
        ::close(fd_);
    }
    NotifySocket(const NotifySocket&) = delete;
    NotifySocket& operator=(const NotifySocket&) = delete;

    // The next datagram, or nothing within `timeout`.
    std::optional<std::string> next(std::chrono::milliseconds timeout) const {
        pollfd ready{fd_, POLLIN, 0};
        if (::poll(&ready, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
        char buffer[4096];
        const ssize_t size = ::recv(fd_, buffer, sizeof buffer, 0);
        if (size < 0) return std::nullopt;
        return std::string(buffer, static_cast<std::size_t>(size));
    }

    // Reads until a datagram that starts with `state`, up to `timeout`; false on time-out.
    // The datagrams read on the way are counted by their first line in `skipped`.
    bool wait_for(const std::string& state, std::chrono::milliseconds timeout, std::vector<std::string>& skipped) const {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < deadline) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            const auto message = next(left);
            if (!message) return false;
            if (message->rfind(state, 0) == 0) return true;
            skipped.push_back(message->substr(0, message->find('\n')));
        }
        return false;
    }

private:
    int fd_ = -1;
};

json two_pack_config(const TempFolder& folder) {
    return {{"device", {{"kind", "simulated"}, {"total_bytes", "24GiB"}}},
            {"limits", {{"heartbeat_timeout_ms", 5000}, {"shutdown_grace_ms", 2000}}},
            {"packs", {reference_pack(folder, "alpha", idle_pack()), reference_pack(folder, "beta", idle_pack())}}};
}

std::string environment_of(pid_t pid) {
    std::ifstream file("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("systemd is told READY=1 once every worker is up, WATCHDOG=1 at half the interval, STOPPING=1 at shutdown") {
    TempFolder folder("notify");
    NotifySocket systemd(folder, 400'000);  // pings every 200 ms
    SupervisorProcess supervisor(two_pack_config(folder));

    std::vector<std::string> before_ready;
    REQUIRE(systemd.wait_for("READY=1", std::chrono::seconds(20), before_ready));
    // Ready only once both workers were: the table says so the moment READY=1 arrives.
    const auto table = supervisor.participants();
    REQUIRE(table.size() == 2);
    for (const auto& participant : table) CHECK(participant.state == ParticipantState::ready);

    // The watchdog pings keep coming while the loop runs: five in about a second.
    const auto started = std::chrono::steady_clock::now();
    int pings = 0;
    while (pings < 5) {
        const auto message = systemd.next(std::chrono::seconds(2));
        REQUIRE(message);
        if (*message == "WATCHDOG=1") ++pings;
    }
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(3));

    // Only the supervisor talks to systemd: its workers get neither variable.
    for (const auto& participant : table) {
        const std::string environment = environment_of(participant.pid);
        CHECK(environment.find("NOTIFY_SOCKET=") == std::string::npos);
        CHECK(environment.find("WATCHDOG_USEC=") == std::string::npos);
    }

    supervisor.kill(SIGTERM);
    std::vector<std::string> after_term;
    CHECK(systemd.wait_for("STOPPING=1", std::chrono::seconds(10), after_term));
    CHECK(supervisor.wait() == 0);
}
