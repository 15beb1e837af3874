// The host's requests on its bridge control socket: a pack's life ended for a Cancel it
// outran (restarted as an operator's restart) or a session that broke (as a crash); a
// request about a life that is over or ending already is moot; anything else is refused
// in one line; and they are read from the socket as datagrams, at most 4 KiB each.
#include <catch2/catch.hpp>

#include "ipc/descriptor_passing.hpp"
#include "supervisor/bridge/host_requests.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <system_error>

using namespace comfy;
using namespace comfy::supervisor;
using Catch::Matchers::Contains;

namespace {

std::array<int, 2> make_pipe() {
    std::array<int, 2> fds{};
    if (::pipe(fds.data()) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
    return fds;
}

// The participant table the requests act on, and what they did to it.
class Lives : public WorkerAccess {
public:
    explicit Lives(boost::asio::io_context& io) {
        PackConfig host;
        host.name = kHostParticipantName;
        table_.push_back(std::make_unique<WorkerProcess>(host, 0, ParticipantKind::host, io, 16));
        PackConfig python;
        python.name = "impact";
        python.python = PythonPack{};
        python.python->cancel_grace = std::chrono::milliseconds(2500);
        table_.push_back(std::make_unique<WorkerProcess>(python, 1, ParticipantKind::worker, io, 16));
        PackConfig plain;
        plain.name = "plain";
        table_.push_back(std::make_unique<WorkerProcess>(plain, 2, ParticipantKind::worker, io, 16));
        for (auto& worker : table_) live_life(*worker);
    }
    ~Lives() {
        for (const int fd : pipe_) ::close(fd);
    }

    // A running life of generation 3, its "pidfd" a pipe that turns readable once it exits.
    void live_life(WorkerProcess& worker) {
        worker.process.pid = 4242;
        worker.process.pidfd = pipe_[0];
        worker.generation = 3;
    }
    void exit_all() { REQUIRE(::write(pipe_[1], "x", 1) == 1); }

    WorkerProcess& pack() { return *table_[1]; }

    const std::vector<std::unique_ptr<WorkerProcess>>& workers() override { return table_; }
    WorkerProcess* live(std::uint32_t, std::uint32_t) override { return nullptr; }
    void deliver(WorkerProcess&, const MessageSlot&) override {}
    void terminate(WorkerProcess& worker, const std::string& reason) override {
        worker.kill_reason = reason;
        stopped.push_back(worker.pack.name + ": " + reason);
    }
    void log_about(const WorkerProcess&, const std::string&, std::string line, LogFields) override {
        logged.push_back(line);
    }
    void happened(LogLevel, const WorkerProcess&, const char*, const std::string&, nlohmann::json) override {}
    bool shutting_down() const noexcept override { return shutting; }
    void start_worker(WorkerProcess&) override {}
    void keep_stopped(WorkerProcess&) override {}

    std::vector<std::string> stopped;
    std::vector<std::string> logged;
    bool shutting = false;

private:
    std::vector<std::unique_ptr<WorkerProcess>> table_;
    std::array<int, 2> pipe_ = make_pipe();
};

std::string end_pack(const std::string& pack, long generation, const std::string& cause, const std::string& detail) {
    return nlohmann::json{{"request", "end_pack"}, {"pack", pack}, {"generation", generation}, {"cause", cause},
                          {"detail", detail}}
        .dump();
}

}  // namespace

TEST_CASE("a Cancel the node outran ends its life as an operator's restart, a broken session as a crash") {
    boost::asio::io_context io;
    Lives lives(io);
    HostRequests requests(io, lives);

    requests.handle(end_pack("impact", 3, "cancel", "node Loop"));
    REQUIRE(lives.stopped.size() == 1);
    CHECK(lives.stopped[0] == "impact: its node did not end within 2500 ms of ComfyUI's Cancel (node Loop)");
    CHECK(lives.pack().operator_intent == OperatorIntent::cancelled);
    // Once it is being stopped, a second request changes nothing.
    requests.handle(end_pack("impact", 3, "broken_session", "it broke the call protocol"));
    CHECK(lives.stopped.size() == 1);
    CHECK(lives.pack().operator_intent == OperatorIntent::cancelled);

    lives.pack().kill_reason.clear();
    lives.pack().operator_intent = OperatorIntent::none;
    requests.handle(end_pack("impact", 3, "broken_session", "it broke the call protocol (a frame of 9 bytes)\n"));
    REQUIRE(lives.stopped.size() == 2);
    CHECK(lives.stopped[1] == "impact: its call session with the host broke: it broke the call protocol (a frame of 9 "
                              "bytes)?");
    CHECK(lives.pack().operator_intent == OperatorIntent::none);
    CHECK(lives.logged.empty());
}

TEST_CASE("a Cancel a pack's callback outran ends its life as a node's does, saying it was a callback") {
    boost::asio::io_context io;
    Lives lives(io);
    HostRequests requests(io, lives);
    requests.handle(end_pack("impact", 3, "cancel_callback", "callback __call__ of pack impact's CALLABLE (function)"));
    REQUIRE(lives.stopped.size() == 1);
    CHECK(lives.stopped[0] == "impact: its callback did not end within 2500 ms of ComfyUI's Cancel (callback __call__ "
                              "of pack impact's CALLABLE (function))");
    CHECK(lives.pack().operator_intent == OperatorIntent::cancelled);
    CHECK(lives.logged.empty());
}

TEST_CASE("a request about a life that is over, or ending already, is moot") {
    boost::asio::io_context io;
    Lives lives(io);
    HostRequests requests(io, lives);
    requests.handle(end_pack("impact", 2, "cancel", "an earlier life"));
    lives.pack().operator_intent = OperatorIntent::stop;  // an operator's stop keeps its intent
    requests.handle(end_pack("impact", 3, "cancel", "node Loop"));
    lives.pack().operator_intent = OperatorIntent::none;
    lives.shutting = true;
    requests.handle(end_pack("impact", 3, "cancel", "node Loop"));
    lives.shutting = false;
    lives.exit_all();  // exited, its pidfd's handler not run yet
    requests.handle(end_pack("impact", 3, "broken_session", "it closed its call socket and lives on"));
    CHECK(lives.stopped.empty());
    CHECK(lives.logged.empty());
}

TEST_CASE("a malformed request is refused in one line, and acts on nothing") {
    boost::asio::io_context io;
    Lives lives(io);
    HostRequests requests(io, lives);
    const auto [request, why] = GENERATE(table<std::string, std::string>({
        {"not json", "not a JSON object whose request is end_pack"},
        {R"({"request": 5})", "not a JSON object whose request is end_pack"},
        {R"({"request": "end_all"})", "not a JSON object whose request is end_pack"},
        {R"({"request": "end_pack", "pack": "impact", "cause": "cancel"})", "without a pack, generation and cause"},
        {end_pack("impact", -3, "cancel", ""), "without a pack, generation and cause"},
        {end_pack("impact", 3, "restart", ""), "of cause restart, not cancel, cancel_callback or broken_session"},
        {end_pack("plain", 3, "cancel", ""), "for plain, no pack in the python form"},
        {end_pack("host", 3, "cancel", ""), "for host, no pack in the python form"},
    }));
    requests.handle(request);
    CHECK(lives.stopped.empty());
    REQUIRE(lives.logged.size() == 1);
    CHECK_THAT(lives.logged[0], Contains("host: refused a bridge request: ") && Contains(why));
}

TEST_CASE("requests are read from the host's control socket, one datagram each, descriptors closed unread") {
    boost::asio::io_context io;
    Lives lives(io);
    HostRequests requests(io, lives);
    auto control = ipc::make_socket_pair(SOCK_SEQPACKET);
    requests.listen(control.first.get());
    control.first.reset();  // the listener reads its own duplicate

    const auto extra = ipc::make_socket_pair(SOCK_STREAM);
    const std::array attached{extra.first.get()};
    REQUIRE(ipc::send_with_descriptors(control.second.get(), std::string(5000, ' ')) == ipc::SendResult::sent);
    REQUIRE(ipc::send_with_descriptors(control.second.get(), end_pack("impact", 3, "cancel", "node Loop"), attached) ==
            ipc::SendResult::sent);
    control.second.reset();  // the host life ends: the listener stops at the end of file
    io.run();
    CHECK(lives.stopped == std::vector<std::string>{
                               "impact: its node did not end within 2500 ms of ComfyUI's Cancel (node Loop)"});
    REQUIRE(lives.logged.size() == 1);
    CHECK_THAT(lives.logged[0], Contains("a request of 5000 bytes (at most 4096)"));
}
