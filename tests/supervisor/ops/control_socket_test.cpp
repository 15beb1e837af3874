// The supervisor's control socket through the real binaries: comfyctl's actions (stop,
// start, restart, release, free, retry) and events, what the supervisor does about each,
// the socket's folder, modes, close-on-exec descriptors and stale file, its validation,
// other users refused, and comfyctl top in a real terminal (tmux).
#include <catch2/catch.hpp>

#include "ipc/shm_segment.hpp"
#include "supervisor/ctl/control_client.hpp"
#include "supervisor/ctl/control_path.hpp"
#include "tests/support/http_client.hpp"
#include "tests/support/sanitizer_reports.hpp"
#include "tests/support/supervisor_process.hpp"
#include "tests/support/test_instance.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

using namespace comfy;
using namespace comfy::test;
using Catch::Matchers::Contains;
using Json = nlohmann::json;

namespace {

constexpr uid_t kNobody = 65534;

struct Ctl {
    int status;
    std::string out;
    std::string err;
};

Ctl comfyctl(const std::string& instance, const std::string& arguments) {
    TempFolder folder("ctl");
    const auto err = folder.path() / "stderr.txt";
    const auto ran = run_and_capture(comfyctl_binary() + " --instance " + instance + " " + arguments + " 2>" + err.string());
    REQUIRE(ran.started);
    return {ran.status, ran.output, read_file(err)};
}

std::size_t lines(const std::string& text) { return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')); }

// Two idle packs that stop within half a second when asked.
Json two_packs(const TempFolder& folder) {
    return {{"device", simulated_device()}, {"limits", {{"heartbeat_timeout_ms", 20000}, {"shutdown_grace_ms", 500}}},
            {"packs", {reference_pack(folder, "alpha", idle_pack()), reference_pack(folder, "beta", idle_pack())}}};
}

bool both_ready(const SupervisorProcess& supervisor) {
    return supervisor.wait_for([](const std::vector<Participant>& table) {
        return table.size() == 2 && std::all_of(table.begin(), table.end(), [](const Participant& p) {
                   return p.state == ParticipantState::ready;
               });
    });
}

// A fresh connection to the control socket at `path`, as any client of this user could open it.
int connect_control(const std::string& path) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path.c_str(), path.size());
    REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    return fd;
}

// The first line `fd` receives, waiting at most 30 s; empty when none came whole.
std::string first_line(int fd) {
    std::string line;
    char c = 0;
    for (pollfd wait{fd, POLLIN, 0}; ::poll(&wait, 1, 30000) == 1 && ::recv(fd, &c, 1, 0) == 1 && c != '\n';) line += c;
    return c == '\n' ? line : std::string();
}

// One request on a fresh connection; the answer line.
std::string raw_request(const std::string& path, const std::string& bytes) {
    const int fd = connect_control(path);
    [[maybe_unused]] const auto sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    std::string answer;
    char chunk[512];
    for (ssize_t n; (n = ::recv(fd, chunk, sizeof chunk, 0)) > 0;) answer.append(chunk, static_cast<std::size_t>(n));
    ::close(fd);
    return answer;
}

// The inodes of the Unix sockets bound to `path`, the listener and its accepted connections.
std::set<std::string> socket_inodes(const std::string& path) {
    std::set<std::string> inodes;
    std::ifstream table("/proc/net/unix");
    std::string line;
    std::getline(table, line);  // the heading
    while (std::getline(table, line)) {
        std::istringstream fields(line);
        std::string slot, refs, protocol, flags, type, state, inode, bound;
        if (fields >> slot >> refs >> protocol >> flags >> type >> state >> inode >> bound && bound == path) {
            inodes.insert(inode);
        }
    }
    return inodes;
}

// For each descriptor of `pid` that is one of `inodes`: whether it is close-on-exec.
std::vector<bool> close_on_exec_of(pid_t pid, const std::set<std::string>& inodes) {
    std::vector<bool> found;
    const auto fds = std::filesystem::path("/proc") / std::to_string(pid) / "fd";
    for (const auto& entry : std::filesystem::directory_iterator(fds)) {
        std::error_code error;
        const auto target = std::filesystem::read_symlink(entry.path(), error).string();
        if (error || target.rfind("socket:[", 0) != 0) continue;
        if (!inodes.count(target.substr(8, target.size() - 9))) continue;
        std::ifstream info(std::filesystem::path("/proc") / std::to_string(pid) / "fdinfo" / entry.path().filename());
        std::string key, flags;
        while (info >> key && key != "flags:") {
        }
        info >> flags;
        found.push_back((std::stoul(flags, nullptr, 8) & O_CLOEXEC) != 0);
    }
    return found;
}

}  // namespace

TEST_CASE("comfyctl stop keeps a pack stopped, start brings it back, restart is no crash") {
    TempFolder folder("control");
    SupervisorProcess supervisor(two_packs(folder));
    REQUIRE(both_ready(supervisor));
    const auto alpha = *supervisor.participant("alpha");
    const auto beta = *supervisor.participant("beta");

    const auto stop = comfyctl(supervisor.instance(), "stop alpha");
    CHECK(stop.status == 0);
    CHECK_THAT(stop.out, Contains("stopping alpha (pid " + std::to_string(alpha.pid) + ")"));
    REQUIRE(supervisor.wait_for_state("alpha", ParticipantState::stopped));
    CHECK(eventually([&] { return !process_exists(alpha.pid); }, std::chrono::seconds(2)));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // past any restart backoff
    CHECK(supervisor.participant("alpha")->state == ParticipantState::stopped);
    CHECK(supervisor.participant("alpha")->generation == alpha.generation);
    CHECK_THAT(comfyctl(supervisor.instance(), "workers").out, Contains("stopped"));
    CHECK_THAT(comfyctl(supervisor.instance(), "stop alpha").out, Contains("alpha is stopped already"));

    const auto start = comfyctl(supervisor.instance(), "start alpha");
    CHECK(start.status == 0);
    CHECK(supervisor.wait_for([&](const std::vector<Participant>&) {
        const auto now = supervisor.participant("alpha");
        return now && now->generation == alpha.generation + 1 && now->state == ParticipantState::ready;
    }));
    CHECK(supervisor.participant("alpha")->restarts == 0);

    const auto restart = comfyctl(supervisor.instance(), "restart beta");
    CHECK(restart.status == 0);
    CHECK_THAT(restart.out, Contains("restarting beta"));
    CHECK(supervisor.wait_for([&](const std::vector<Participant>&) {
        const auto now = supervisor.participant("beta");
        return now && now->generation == beta.generation + 1 && now->state == ParticipantState::ready;
    }));
    CHECK(supervisor.participant("beta")->restarts == 0);  // not counted as a crash
    CHECK_THAT(supervisor.log(), Contains("beta: restarting now, as an operator asked"));

    const auto running = comfyctl(supervisor.instance(), "start beta");
    CHECK(running.status == 1);
    CHECK(lines(running.err) == 1);
    CHECK_THAT(running.err, Contains("beta is not stopped or failed but ready"));

    const auto unknown = comfyctl(supervisor.instance(), "stop gamma");
    CHECK(unknown.status == 2);
    CHECK(lines(unknown.err) == 1);
    CHECK_THAT(unknown.err, Contains("no pack named 'gamma'; the packs are alpha, beta"));

    CHECK(supervisor.stop() == 0);
    CHECK_FALSE(std::filesystem::exists(ctl::control_socket_path(supervisor.instance())));
}

TEST_CASE("release, free, retry and events go through the control socket") {
    TempFolder folder("control");
    SupervisorProcess supervisor(two_packs(folder));
    REQUIRE(both_ready(supervisor));
    CHECK_THAT(comfyctl(supervisor.instance(), "release alpha").out, Contains("asked alpha for a full release"));
    CHECK_THAT(comfyctl(supervisor.instance(), "release beta --pins 1MiB").out,
               Contains("asked beta to release 1.0 MiB of pinned memory"));
    CHECK_THAT(comfyctl(supervisor.instance(), "free").out, Contains("asked every running participant"));
    CHECK_THAT(comfyctl(supervisor.instance(), "retry").out, Contains("no pack is failed"));
    CHECK_THAT(comfyctl(supervisor.instance(), "retry beta").err, Contains("beta is not stopped or failed"));
    CHECK(comfyctl(supervisor.instance(), "stop beta").status == 0);
    REQUIRE(supervisor.wait_for_state("beta", ParticipantState::stopped));
    const auto released = comfyctl(supervisor.instance(), "release beta");
    CHECK(released.status == 1);
    CHECK_THAT(released.err, Contains("beta is stopped, not running"));

    const auto events = comfyctl(supervisor.instance(), "events");
    CHECK(events.status == 0);
    CHECK_THAT(events.out, Contains("TIME (UTC)"));
    CHECK_THAT(events.out, Contains("operator asked for a full release"));
    CHECK_THAT(events.out, Contains("stopped by an operator"));
    const auto json = comfyctl(supervisor.instance(), "events --json");
    CHECK(json.status == 0);
    std::istringstream lines_of(json.out);
    std::size_t parsed = 0;
    for (std::string line; std::getline(lines_of, line); ++parsed) {
        const auto event = Json::parse(line);
        CHECK(event["seq"].is_number_unsigned());
        CHECK(event["kind"].is_string());
    }
    CHECK(parsed >= 6);  // two spawns, two ready, the operator's releases, the stop
    // What an operator asked for is no failure; a SIGKILL nobody asked for and its restart are.
    CHECK(comfyctl(supervisor.instance(), "events --failures --json").out.empty());
    const auto alpha = *supervisor.participant("alpha");
    REQUIRE(::kill(alpha.pid, SIGKILL) == 0);
    REQUIRE(supervisor.wait_for([&](const std::vector<Participant>&) {
        const auto now = supervisor.participant("alpha");
        return now && now->generation > alpha.generation && now->state == ParticipantState::ready;
    }));
    std::istringstream failures(comfyctl(supervisor.instance(), "events --failures --json").out);
    std::vector<std::string> kinds;
    for (std::string line; std::getline(failures, line);) {
        const auto event = Json::parse(line);
        CHECK(event["level"] == "warning");
        kinds.push_back(event["kind"]);
    }
    CHECK(kinds == std::vector<std::string>{"exited", "restarting"});
    CHECK(supervisor.stop() == 0);
}

TEST_CASE("comfyctl events --follow prints new events as they happen until Ctrl-C") {
    TempFolder folder("control");
    SupervisorProcess supervisor(two_packs(folder));
    REQUIRE(both_ready(supervisor));
    const auto output = (folder.path() / "follow.txt").string();
    const std::string binary = comfyctl_binary();
    const std::string instance = supervisor.instance();
    ChildProcess follower([&] {
        const int out = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ::dup2(out, STDOUT_FILENO);
        ::execl(binary.c_str(), binary.c_str(), "--instance", instance.c_str(), "events", "--follow", nullptr);
        return 127;
    });
    REQUIRE(eventually([&] { return read_file(output).find("ready") != std::string::npos; }, std::chrono::seconds(5)));
    CHECK(read_file(output).find("stopped by an operator") == std::string::npos);
    CHECK(comfyctl(instance, "stop alpha").status == 0);
    CHECK(eventually([&] { return read_file(output).find("stopped by an operator") != std::string::npos; },
                     std::chrono::seconds(5)));
    follower.kill(SIGINT);
    CHECK(follower.wait() == 0);
    CHECK(supervisor.stop() == 0);
}

TEST_CASE("a stopped pack's requests fail at once, saying it is stopped") {
    TempFolder folder("control");
    const Json slow = {{"nodes", {{"slow", {step_compute(1500)}}}}};
    Json config = two_packs(folder);
    config["packs"][0] = reference_pack(folder, "alpha", slow);
    SupervisorProcess supervisor(config, workload_of({{node("alpha", "slow")}, {node("beta", "noop")}}));
    REQUIRE(supervisor.wait_for_state("alpha", ParticipantState::busy));
    CHECK(comfyctl(supervisor.instance(), "stop beta").status == 0);
    CHECK(supervisor.wait() == 1);  // the second prompt failed
    CHECK_THAT(supervisor.log(), Contains("node noop could not run: its pack is stopped by an operator"));
}

TEST_CASE("the control socket is its user's alone, close-on-exec, replaced when stale, gone at exit") {
    const std::string instance = test_instance("ctlsock");
    const auto path = ctl::control_socket_path(instance);
    // A socket file a killed supervisor of this instance left behind.
    std::filesystem::create_directories(path.parent_path());
    {
        const int stale = ::socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        std::memcpy(address.sun_path, path.c_str(), path.native().size());
        REQUIRE(::bind(stale, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
        ::close(stale);
    }
    TempFolder folder("control");
    SupervisorProcess supervisor(two_packs(folder), std::nullopt, instance);
    REQUIRE(both_ready(supervisor));

    struct stat about {};
    REQUIRE(::stat(path.parent_path().c_str(), &about) == 0);
    CHECK((about.st_mode & 0777) == 0700);
    CHECK(about.st_uid == ::geteuid());
    REQUIRE(::lstat(path.c_str(), &about) == 0);
    CHECK(S_ISSOCK(about.st_mode));
    CHECK((about.st_mode & 0777) == 0600);

    // A follower keeps an accepted connection open while the descriptors are looked at.
    ctl::ControlClient client(instance);
    ctl::ControlRequest follow;
    follow.op = ctl::Op::events;
    follow.follow = true;
    client.send(follow);
    CHECK(client.answer(std::chrono::seconds(5))["ok"] == true);
    const auto inodes = socket_inodes(path.string());
    const auto flags = close_on_exec_of(supervisor.pid(), inodes);
    CHECK(flags.size() >= 2);  // the listener and the follower's connection
    CHECK(std::all_of(flags.begin(), flags.end(), [](bool cloexec) { return cloexec; }));
    // A worker started now has none of them.
    CHECK(comfyctl(instance, "restart alpha").status == 0);
    REQUIRE(supervisor.wait_for([&](const std::vector<Participant>&) {
        const auto alpha = supervisor.participant("alpha");
        return alpha && alpha->generation == 2 && alpha->state == ParticipantState::ready;
    }));
    CHECK(close_on_exec_of(supervisor.participant("alpha")->pid, socket_inodes(path.string())).empty());

    CHECK(supervisor.stop() == 0);
    CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("a control socket that a live process accepts on is never replaced: the supervisor refuses, status 2") {
    // A supervisor of this instance in another network namespace, which the instance's lock
    // does not reach (ipc/instance_lock.hpp), listens there: this process plays it.
    const std::string instance = test_instance("ctllive");
    const auto path = ctl::control_socket_path(instance);
    std::filesystem::create_directories(path.parent_path());
    const int live = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(live >= 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path.c_str(), path.native().size());
    REQUIRE(::bind(live, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(live, 4) == 0);
    struct stat made {};
    REQUIRE(::lstat(path.c_str(), &made) == 0);

    TempFolder folder("control");
    const auto config = folder.write("config.json", with_sanitizer_environment(two_packs(folder)).dump());
    const auto run = run_and_capture("timeout 30 " + supervisor_binary() + " run --config " + config.string() +
                                     " --instance " + instance + " 2>&1");
    INFO(run.output);
    CHECK(run.status == 2);
    CHECK(count_of(run.output, "in use") == 1);
    CHECK_THAT(run.output, Contains("control socket " + path.string() + ": in use by a live supervisor"));
    // Nothing of it is left under /dev/shm, and the socket is still the listener's: the same
    // file, and a client reaches it.
    CHECK(ipc::inspect_segment(ipc::segment_name(instance)).state == ipc::SegmentState::absent);
    struct stat now {};
    CHECK(::lstat(path.c_str(), &now) == 0);
    CHECK(now.st_ino == made.st_ino);
    const int client = connect_control(path.string());
    const int accepted = ::accept4(live, nullptr, nullptr, SOCK_CLOEXEC);
    CHECK(accepted >= 0);
    for (const int fd : {accepted, client, live}) ::close(fd);
    std::filesystem::remove(path);
}

TEST_CASE("control requests are validated and bounded, and other users are refused") {
    TempFolder folder("control");
    SupervisorProcess supervisor(two_packs(folder));
    REQUIRE(both_ready(supervisor));
    const std::string path = ctl::control_socket_path(supervisor.instance()).string();
    const auto unknown = Json::parse(raw_request(path, "{\"op\": \"reboot\"}\n"));
    CHECK(unknown["ok"] == false);
    CHECK(unknown["error"] == "bad_request");
    CHECK_THAT(unknown["message"].get<std::string>(), Contains("unknown op 'reboot'"));
    const auto huge = Json::parse(raw_request(path, std::string(8192, 'x')));
    CHECK(huge["error"] == "bad_request");
    CHECK_THAT(huge["message"].get<std::string>(), Contains("at most 4096 bytes"));
    const auto field = Json::parse(raw_request(path, "{\"op\": \"free\", \"all\": true}\n"));
    CHECK(field["error"] == "bad_request");

    if (::geteuid() != 0) {
        WARN("not root: no other user to connect as, so the refusal of one is not tried");
    } else {
        // Another user whose file-system uid is still root's reaches the socket, as a
        // loosened folder would let them; SO_PEERCRED gives the effective uid, nobody's.
        ChildProcess other([&] {
            if (::seteuid(kNobody) != 0) return 2;
            ::setfsuid(0);
            if (static_cast<uid_t>(::setfsuid(static_cast<uid_t>(-1))) != 0) return 3;
            const auto answer = raw_request(path, "{\"op\": \"free\"}\n");
            return answer.find("not_permitted") != std::string::npos ? 0 : 1;
        });
        CHECK(other.wait() == 0);
        CHECK(eventually([&] { return supervisor.log().find("refused a connection from uid 65534") != std::string::npos; },
                         std::chrono::seconds(5)));
        CHECK_THAT(supervisor.log(), Contains("only uid 0, the supervisor's, may use"));
    }
    CHECK(supervisor.stop() == 0);
}

TEST_CASE("one process holding control connections cannot lock comfyctl out, and a silent client is let go") {
    // Before: one process following the events 16 times over took every connection, and
    // comfyctl was refused for as long as it stayed.
    TempFolder folder("control");
    Json config = two_packs(folder);
    config["http"] = {{"listen", "127.0.0.1:0"}};
    SupervisorProcess supervisor(config);
    REQUIRE(both_ready(supervisor));
    const std::string path = ctl::control_socket_path(supervisor.instance()).string();
    std::vector<int> hog;
    for (int i = 0; i < 16; ++i) {
        hog.push_back(connect_control(path));
        const std::string follow = "{\"op\": \"events\", \"follow\": true}\n";
        // One refused may be closed already: its answer waits to be read all the same.
        [[maybe_unused]] const auto sent = ::send(hog.back(), follow.data(), follow.size(), MSG_NOSIGNAL);
    }
    // Accepted in order: the first four follow, each one after them is refused at once.
    for (std::size_t i = 0; i < hog.size(); ++i) {
        INFO("connection " << i);
        const auto answer = Json::parse(first_line(hog[i]));
        if (i < 4) {
            CHECK(answer["ok"] == true);
        } else {
            CHECK(answer["error"] == "refused");
            CHECK_THAT(answer["message"].get<std::string>(),
                       Contains("this process holds 4 control connections already, the most one process may"));
        }
    }
    const auto freed = comfyctl(supervisor.instance(), "free");
    CHECK(freed.status == 0);
    CHECK_THAT(freed.out, Contains("asked every running participant"));
    CHECK_THAT(supervisor.log(), Contains("control: turned away a connection from pid " + std::to_string(::getpid()) +
                                          ": it holds 4 open already, the most one process may"));
    for (const int fd : hog) ::close(fd);

    // A client that connects and says nothing is closed at the request's time-out.
    const int silent = connect_control(path);
    char byte = 0;
    pollfd wait{silent, POLLIN, 0};
    CHECK(::poll(&wait, 1, 30000) == 1);
    CHECK(::recv(silent, &byte, 1, 0) == 0);
    ::close(silent);
    CHECK_THAT(supervisor.log(), Contains("control: closed a connection from pid " + std::to_string(::getpid()) +
                                          " that sent no whole request within 5 s"));
    const auto port = http_port(supervisor);
    REQUIRE(port);
    const auto metrics = http_request(*port, "GET", "/metrics").body;
    CHECK_THAT(metrics, Contains("comfy_control_refused_total{reason=\"client_connections\"} 12"));
    CHECK_THAT(metrics, Contains("comfy_control_refused_total{reason=\"timeout\"} 1"));
    CHECK(supervisor.stop() == 0);
}

TEST_CASE("comfyctl without a supervisor's socket says so in one line, status 1") {
    const auto instance = test_instance("absent");
    const auto run = comfyctl(instance, "restart alpha");
    CHECK(run.status == 1);
    CHECK(lines(run.err) == 1);
    CHECK_THAT(run.err, Contains("cannot reach the supervisor at " + ctl::control_socket_path(instance).string()));
    CHECK_THAT(run.err, Contains("is it running with this --instance?"));
}

TEST_CASE("comfyctl top shows every participant with a bar in a terminal, and q ends it") {
    REQUIRE(run_and_capture("command -v tmux").status == 0);  // scripts/setup installs it
    TempFolder folder("control");
    SupervisorProcess supervisor(two_packs(folder));
    REQUIRE(both_ready(supervisor));
    // A private tmux server, killed whatever happens.
    const std::string tmux = "tmux -L comfy-top-" + std::to_string(::getpid());
    struct KillServer {
        std::string tmux;
        ~KillServer() { run_and_capture(tmux + " kill-server 2>/dev/null"); }
    } cleanup{tmux};
    REQUIRE(run_and_capture(tmux + " new-session -d -x 100 -y 30 '" + comfyctl_binary() + " --instance " +
                            supervisor.instance() + " top'")
                .status == 0);
    std::string screen;
    CHECK(eventually(
        [&] {
            screen = run_and_capture(tmux + " capture-pane -p 2>/dev/null").output;
            return screen.find("beta") != std::string::npos && screen.find("alpha") != std::string::npos;
        },
        std::chrono::seconds(10)));
    INFO(screen);
    CHECK_THAT(screen, Contains("comfyctl top: instance " + supervisor.instance()));
    CHECK_THAT(screen, Contains("reserve"));
    CHECK_THAT(screen, Contains("[...."));
    CHECK_THAT(screen, Contains("ready"));
    REQUIRE(run_and_capture(tmux + " send-keys q").status == 0);
    // The pane's program ended, and with the only pane the session and the server.
    CHECK(eventually([&] { return run_and_capture(tmux + " has-session 2>/dev/null").status != 0; },
                     std::chrono::seconds(5)));
    CHECK(supervisor.stop() == 0);
}

TEST_CASE("the operator's signals still work beside the socket: SIGUSR1 frees, SIGHUP retries") {
    TempFolder folder("control");
    SupervisorProcess supervisor(two_packs(folder));
    REQUIRE(both_ready(supervisor));
    supervisor.kill(SIGUSR1);
    CHECK(eventually([&] { return supervisor.log().find("operator asked for a full release") != std::string::npos; },
                     std::chrono::seconds(5)));
    supervisor.kill(SIGHUP);  // nothing is failed: nothing happens, and the supervisor stays
    CHECK_THAT(comfyctl(supervisor.instance(), "events").out, Contains("full release of every worker"));
    CHECK(supervisor.stop() == 0);
}
