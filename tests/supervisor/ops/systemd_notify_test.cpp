// The supervisor under a systemd that wants notifications (Type=notify, WatchdogSec): the
// test is systemd, a datagram socket named by NOTIFY_SOCKET, and reads what the real
// supervisor sends through libsystemd's sd_notify: READY=1, the watchdog's pings, the
// start's extensions while a slow host starts and where they end, and a GPU awaited.
#include <catch2/catch.hpp>

#include "tests/support/http_client.hpp"
#include "tests/support/supervisor_process.hpp"
#include "worker/device_factory.hpp"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
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
    return {{"device", simulated_device()},
            {"limits", {{"heartbeat_timeout_ms", 5000}, {"shutdown_grace_ms", 2000}}},
            {"packs", {reference_pack(folder, "alpha", idle_pack()), reference_pack(folder, "beta", idle_pack())}}};
}

// A stand-in for a ComfyUI whose start takes minutes: the reference worker as the host,
// started only once the test creates `gate`, so that the start lasts as long as the test
// wants, not as long as a clock says.
json slow_host(const TempFolder& folder, const std::filesystem::path& gate) {
    const json worker = reference_pack(folder, "slow-host", idle_pack());
    std::string exec = "exec '" + worker["command"].get<std::string>() + "'";
    for (const auto& arg : worker["args"]) exec += " '" + arg.get<std::string>() + "'";
    return {{"command", "/bin/sh"},
            {"args", {"-c", "while [ ! -e '" + gate.string() + "' ]; do sleep 0.05; done; " + exec}}};
}

json slow_host_config(const TempFolder& folder, const std::filesystem::path& gate) {
    return {{"device", simulated_device()},
            {"limits", {{"heartbeat_timeout_ms", 20000}, {"shutdown_grace_ms", 2000}}},
            {"http", {{"listen", "127.0.0.1:0"}}},
            {"comfyui", slow_host(folder, gate)},
            {"packs", {reference_pack(folder, "alpha", idle_pack())}}};
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

TEST_CASE("a host that starts slowly: systemd's start time-out is extended step by step until READY=1") {
    TempFolder folder("slow-host");
    NotifySocket systemd(folder, 400'000);  // a step of 200 ms, each extension three steps
    const auto gate = folder.path() / "gate";
    SupervisorProcess supervisor(slow_host_config(folder, gate));
    const auto port = http_port(supervisor);
    REQUIRE(port);

    // However long the host takes, the steps go on, each saying who is awaited, and each
    // extension outlasts the next step; nothing says ready meanwhile.
    int steps = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (steps < 8) {
        REQUIRE(std::chrono::steady_clock::now() < deadline);
        const auto message = systemd.next(std::chrono::seconds(10));
        REQUIRE(message);
        INFO(*message);
        CHECK(message->rfind("READY=1", 0) == std::string::npos);
        // Counted once the pack is up, so that the host alone is awaited.
        if (*message == "EXTEND_TIMEOUT_USEC=600000\nSTATUS=starting: 1 of 2 participants up; "
                        "waiting for host (spawning)") {
            ++steps;
        }
    }
    const auto waiting = http_request(*port, "GET", "/readyz");
    CHECK(waiting.status == 503);
    CHECK(json::parse(waiting.body)["waiting"] == json::parse(R"([{"name": "host", "state": "spawning"}])"));
    CHECK(http_request(*port, "GET", "/healthz").status == 200);

    std::ofstream(gate.string()).put('\n');
    std::vector<std::string> before_ready;
    REQUIRE(systemd.wait_for("READY=1\nSTATUS=2 of 2 participants up", std::chrono::seconds(30), before_ready));
    CHECK(http_request(*port, "GET", "/readyz").status == 200);
    // No extension after READY=1: the watchdog's pings only.
    for (int i = 0; i < 3; ++i) {
        const auto message = systemd.next(std::chrono::seconds(2));
        REQUIRE(message);
        CHECK(*message == "WATCHDOG=1");
    }
    supervisor.kill(SIGTERM);
    CHECK(supervisor.wait() == 0);
}

TEST_CASE("a start that outlasts the config's own limits is extended no more: systemd's time-out decides") {
    TempFolder folder("outlasted");
    NotifySocket systemd(folder, 400'000);
    json config = slow_host_config(folder, folder.path() / "never");
    // The longest start these limits allow: a second (the host's Hello, or a pack's Hello and then its ready).
    config["limits"]["host_handshake_timeout_ms"] = 1000;
    config["limits"]["handshake_timeout_ms"] = 500;
    config["limits"]["ready_timeout_ms"] = 500;
    config.erase("http");
    SupervisorProcess supervisor(config);
    std::vector<std::string> extended;
    REQUIRE(systemd.wait_for("STATUS=the start has outlasted the config's limits (1 s)", std::chrono::seconds(30),
                             extended));
    CHECK(std::count_if(extended.begin(), extended.end(),
                        [](const std::string& line) { return line.rfind("EXTEND_TIMEOUT_USEC=", 0) == 0; }) >= 3);
    // Five steps more: pings, never an extension.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (std::chrono::steady_clock::now() < until) {
        const auto message = systemd.next(std::chrono::milliseconds(200));
        if (message) CHECK(message->rfind("EXTEND_TIMEOUT_USEC=", 0) == std::string::npos);
    }
    supervisor.kill(SIGTERM);
    CHECK(supervisor.wait() == 0);
}

TEST_CASE("while the GPU is not usable, systemd hears why at every try, and the exit is one it restarts") {
    TempFolder folder("no-gpu");
    NotifySocket systemd(folder, 400'000);
    // Device 63: no machine this runs on has 64 GPUs.
    const json config = {{"device", {{"kind", "cuda"}, {"index", 63}, {"wait_ms", 700}}},
                         {"packs", {reference_pack(folder, "alpha", idle_pack())}}};
    SupervisorProcess supervisor(config);
    const int status = supervisor.wait();
    std::vector<std::string> told;
    while (const auto message = systemd.next(std::chrono::milliseconds(0))) told.push_back(*message);
    if (!comfy::worker::built_with_cuda()) {
        CHECK(status == 2);  // never usable by this build: nothing to wait for
        CHECK(told.empty());
        return;
    }
    CHECK(status == 75);
    // Tries at 0, 250 and 700 ms (fewer when a probe is slow): told of all but the last,
    // each extension past the next try.
    REQUIRE(!told.empty());
    for (const auto& message : told) {
        INFO(message);
        CHECK(message.rfind("EXTEND_TIMEOUT_USEC=", 0) == 0);
        CHECK(std::stoll(message.substr(20)) > 30'000'000);  // the next try and a probe's time-out
        CHECK(message.find("\nSTATUS=waiting for the GPU (") != std::string::npos);
        CHECK(message.find("device.wait_ms): CUDA device 63 is not usable") != std::string::npos);
    }
}
