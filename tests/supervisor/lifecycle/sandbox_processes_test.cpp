// The sandbox for real, where bwrap can make one (otherwise each test says why it did
// not run): a sandboxed worker keeps its inherited descriptor at its number, writes only
// its folders, has no network, no view of the supervisor's segment or of other
// processes, and goes when the supervisor is SIGKILLed.
#include <catch2/catch.hpp>

#include "supervisor/lifecycle/process_spawner.hpp"
#include "supervisor/lifecycle/sandbox.hpp"
#include "supervisor/lifecycle/sandbox_check.hpp"
#include "tests/support/sandbox_skip.hpp"
#include "tests/support/supervisor_process.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

using namespace comfy;
using namespace comfy::test;
using supervisor::SandboxConfig;
using nlohmann::json;

namespace {

// A TCP listener on the host's 127.0.0.1 that a process outside the sandbox could reach.
class Listener {
public:
    Listener() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof address;
        if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 || ::listen(fd_, 4) != 0 ||
            ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
            throw std::runtime_error("cannot listen on 127.0.0.1");
        }
        port_ = ntohs(address.sin_port);
    }
    ~Listener() { ::close(fd_); }
    int port() const { return port_; }

private:
    int fd_;
    int port_ = 0;
};

// Running, not a zombie nor gone.
bool running(pid_t pid) {
    const auto stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    const auto close = stat.rfind(')');
    return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

// `pid` and every process under it.
std::vector<pid_t> process_tree(pid_t pid) {
    std::vector<pid_t> tree{pid};
    for (std::size_t i = 0; i < tree.size(); ++i) {
        const auto folder = "/proc/" + std::to_string(tree[i]) + "/task";
        std::error_code error;
        for (const auto& task : std::filesystem::directory_iterator(folder, error)) {
            std::istringstream children(read_file(task.path() / "children"));
            for (pid_t child = 0; children >> child;) tree.push_back(child);
        }
    }
    return tree;
}

std::string probe_binary() { return SANDBOX_PROBE_PATH; }

}  // namespace

TEST_CASE("a descriptor inherited by a sandboxed process is open inside at the same number") {
    SKIP_WITHOUT_BWRAP();
    TempFolder folder("fd");
    int pipe_fds[2];
    REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
    const std::string message = "through the sandbox";
    REQUIRE(::write(pipe_fds[1], message.data(), message.size()) == static_cast<ssize_t>(message.size()));
    ::close(pipe_fds[1]);

    supervisor::SpawnRequest request;
    request.command = "/bin/sh";
    // The shell is told the number, as a worker is told its descriptors' numbers.
    request.args = {"-c", "cat <&\"$INHERITED_FD\" >read.txt"};
    request.environment = {{"INHERITED_FD", std::to_string(pipe_fds[0])}};
    request.working_directory = folder.path().string();
    request.inherited_fds = {pipe_fds[0]};
    SandboxConfig sandbox;
    sandbox.writable = {folder.path().string()};
    auto process = supervisor::spawn_process(supervisor::sandboxed_request(request, sandbox, {}));
    ::close(pipe_fds[0]);
    int status = 0;
    REQUIRE(::waitpid(process.pid, &status, 0) == process.pid);
    CHECK(supervisor::take_start_failure(process).step == supervisor::StartFailure::Step::none);
    ::close(process.pidfd);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(read_file(folder.path() / "read.txt") == message);
    reap_orphans();
}

TEST_CASE("a sandboxed worker writes only its folders, has no network, no segment and no other process") {
    SKIP_WITHOUT_BWRAP();
    TempFolder pack_folder("pack");
    TempFolder declared("declared");
    TempFolder shown("shown");
    const auto readable_file = shown.write("model.txt", "weights\n");
    const Listener host;
    // A folder on the host's file system, writable outside and not under /tmp or /run
    // (which the sandbox replaces with its own, writable, empty ones).
    const std::filesystem::path outside = "/var/tmp";
    const json pack = {{"name", "boxed"},
                       {"command", probe_binary()},
                       {"args",
                        {"--outside", outside.string(), "--writable", declared.path().string(), "--readable",
                         readable_file.string(), "--port", std::to_string(host.port())}},
                       {"working_directory", pack_folder.path().string()},
                       {"restart", {{"max_restarts", 0}}},
                       {"sandbox", {{"writable", {declared.path().string()}}, {"readable", {shown.path().string()}}}}};
    SupervisorProcess supervisor(
        {{"device", simulated_device()}, {"limits", {{"handshake_timeout_ms", 600000}, {"shutdown_grace_ms", 500}}},
         {"packs", {pack}}});
    const auto report_file = pack_folder.path() / "report.txt";
    REQUIRE(eventually([&] { return std::filesystem::exists(report_file); }, std::chrono::seconds(10)));
    const auto report = read_key_values(report_file);
    INFO(read_file(report_file));

    // Read-only but its own folder (the report is there) and the declared one.
    CHECK(report.at("write_outside") == "EROFS");
    CHECK(report.at("write_declared") == "ok");
    CHECK(std::filesystem::exists(declared.path() / "probe-was-here"));
    std::filesystem::remove(outside / "probe-was-here");  // in case the sandbox failed
    // Shown read-only although under the hidden /tmp.
    CHECK(report.at("readable") == "weights,EROFS");
    // A network namespace of its own: loopback only, and the host's 127.0.0.1 is not ours.
    CHECK(report.at("interfaces") == "lo");
    CHECK(report.at("connect_host") == "ECONNREFUSED");
    // Its own empty /dev/shm: the supervisor's segment is not there by name.
    CHECK(report.at("dev_shm") == "-");
    CHECK(report.at("open_segment") == "ENOENT");
    // Its own pid namespace: bwrap's pid 1 and itself, not the supervisor.
    CHECK(report.at("pid") == "2");
    CHECK(report.at("processes") == "bwrap,sandbox-probe");
    // The doorbell the supervisor passed is open at the number it was told, and works.
    CHECK(report.at("doorbell") == "anon_inode:[eventfd],ok");

    CHECK(supervisor.stop() == 0);
}

TEST_CASE("a sandboxed worker dies when its supervisor is SIGKILLed") {
    SKIP_WITHOUT_BWRAP();
    TempFolder pack_folder("pack");
    const json pack = {{"name", "boxed"},
                       {"command", probe_binary()},
                       {"working_directory", pack_folder.path().string()},
                       {"sandbox", json::object()}};
    SupervisorProcess supervisor(
        {{"device", simulated_device()}, {"limits", {{"handshake_timeout_ms", 600000}}}, {"packs", {pack}}});
    REQUIRE(eventually([&] { return std::filesystem::exists(pack_folder.path() / "report.txt"); },
                       std::chrono::seconds(10)));
    const auto bwrap = supervisor.participant("boxed")->pid;
    const auto sandbox = process_tree(bwrap);
    REQUIRE(sandbox.size() == 3);  // bwrap, its pid 1, the worker
    for (const pid_t pid : sandbox) CHECK(running(pid));

    supervisor.kill(SIGKILL);
    CHECK(supervisor.wait() == 128 + SIGKILL);
    CHECK(eventually(
        [&] { return std::none_of(sandbox.begin(), sandbox.end(), running); }, std::chrono::seconds(5)));
}

TEST_CASE("a sandboxed reference worker takes part in full: Hello, admissions, loads, evictions") {
    SKIP_WITHOUT_BWRAP();
    TempFolder packs("boxed");
    json boxed = reference_pack(packs, "boxed", {{"nodes", {{"load", {step_load("big", "14GiB")}}}}});
    boxed["sandbox"] = {{"readable", {packs.path().string()}}};  // its pack file, under the hidden /tmp
    const json other = reference_pack(packs, "other", {{"nodes", {{"load", {step_load("huge", "14GiB")}}}}});
    SupervisorProcess supervisor(memory_config_of({boxed, other}),
                                 workload_of({{node("boxed", "load"), node("other", "load"), node("boxed", "load")}}));
    CHECK(supervisor.wait() == 0);
    INFO(supervisor.log());
    CHECK_THAT(supervisor.output(), Catch::Matchers::Contains("prompts run        1 of 1 (0 failed)"));
    CHECK_THAT(supervisor.log(), Catch::Matchers::Contains("boxed: ready"));
    CHECK(census_figure(supervisor.output(), "boxed", 0) == 14 * kGiBf);
    reap_orphans();
}
