#include "supervisor/lifecycle/warm_templates.hpp"

#include "ipc/descriptor_passing.hpp"
#include "ipc/process_identity.hpp"
#include "supervisor/config/install_layout.hpp"
#include "supervisor/lifecycle/sandbox.hpp"
#include "supervisor/lifecycle/worker_process.hpp"
#include "worker/worker_environment.hpp"
#include "supervisor/ops/log/log.hpp"

#include <boost/asio/steady_timer.hpp>

#include <nlohmann/json.hpp>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <tuple>
#include <utility>

namespace comfy::supervisor {

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kTemplateFdVariable = "COMFY_SV_TEMPLATE_FD";
constexpr const char* kPythonPath = "PYTHONPATH";
// A template that lived this long before it ended is started again; one that ended sooner
// would most likely end again, and its packs start cold until an operator restarts.
constexpr std::chrono::seconds kLivedLongEnough{60};
constexpr std::size_t kAnswerBytes = 4096;
// Room for a forked worker's command line: its interpreter, pack_worker and its pack's name.
constexpr std::size_t kTitleRoomBytes = 256;
// How long its imports may take: torch's, from a cold disk, can take tens of seconds.
constexpr std::chrono::seconds kReadyWithin{120};

std::string join(const std::vector<std::string>& names) {
    std::string joined;
    for (const auto& name : names) joined += (joined.empty() ? "" : ", ") + name;
    return joined;
}

}  // namespace

struct WarmTemplates::Template {
    explicit Template(boost::asio::io_context& io) : socket(io), pidfd(io), ready_timer(io) {}

    enum class State { starting, ready, failed };

    std::string command;  // ComfyUI's interpreter, or its first pack's (a venv's, whose .pth files find the host's)
    std::string interpreter;  // what it resolves to, which every one of its packs' does
    std::map<std::string, std::string> environment;  // the packs' own, PYTHONPATH ours alone
    std::vector<std::string> packs;
    State state = State::starting;
    SpawnedProcess process;
    boost::asio::posix::stream_descriptor socket;  // ours of the pair; its own is COMFY_SV_TEMPLATE_FD
    boost::asio::posix::stream_descriptor pidfd;
    boost::asio::steady_timer ready_timer;
    std::shared_ptr<ChildOutput> output;
    Clock::time_point started_at;

    std::string name() const { return "the warm template of " + interpreter + " (packs " + join(packs) + ")"; }
};

WarmTemplates::WarmTemplates(boost::asio::io_context& io, const std::vector<PackConfig>& packs,
                             const std::optional<PackConfig>& host, const std::string& instance)
    : io_(io) {
    std::error_code unresolved;
    const auto host_interpreter =
        host ? std::filesystem::canonical(host->command, unresolved) : std::filesystem::path();
    // Packs by what they would import: the interpreter their command resolves to and their
    // environment but PYTHONPATH, which the worker takes from its interpreter's own answer;
    // each with its PYTHONPATH.
    using Key = std::pair<std::string, std::map<std::string, std::string>>;
    std::map<Key, std::vector<std::pair<const PackConfig*, std::string>>> sharing;
    for (const auto& pack : packs) {
        if (!pack.python || !pack.python->warm_template || pack.sandbox) continue;
        std::error_code error;
        const auto interpreter = std::filesystem::canonical(pack.command, error);
        if (error) continue;  // missing now: its start says so, cold
        auto environment = configured_environment(pack);
        auto path = environment[kPythonPath];
        environment.erase(kPythonPath);
        sharing[{interpreter.string(), std::move(environment)}].emplace_back(&pack, std::move(path));
    }
    for (const auto& [key, members] : sharing) {
        if (members.size() < 2) continue;  // one pack alone starts cold: a template would only add a process
        auto warm = std::make_unique<Template>(io_);
        std::tie(warm->interpreter, warm->environment) = key;
        // ComfyUI's interpreter where it is the packs' too: a pack's environment that pins its
        // own numpy then leaves the others warm, as it would not as the template's.
        warm->command = !unresolved && host && host_interpreter == warm->interpreter ? host->command
                                                                                      : members.front().first->command;
        // Their PYTHONPATH where they all have one (a sitecustomize on it is imported at the
        // start, as the packs' own starts import it); else ours alone.
        const auto& path = members.front().second;
        const bool shared_path =
            std::all_of(members.begin(), members.end(), [&](const auto& member) { return member.second == path; });
        warm->environment[kPythonPath] = shared_path ? path : python_package_dir();
        // Its workers' /proc/PID/environ is its own, as a fork keeps it: whoever looks for an
        // instance's processes there (tests/soak's probe) finds them.
        warm->environment[worker::kEnvInstance] = instance;
        for (const auto& [pack, _] : members) {
            warm->packs.push_back(pack->name);
            by_pack_[pack->name] = warm.get();
        }
        templates_.push_back(std::move(warm));
    }
}

WarmTemplates::~WarmTemplates() { stop(); }

void WarmTemplates::start(std::function<void()> settled) {
    settled_ = std::move(settled);
    for (auto& warm : templates_) launch(*warm);
    settle_if_done();
}

void WarmTemplates::launch(Template& warm) {
    warm.state = Template::State::starting;
    warm.started_at = Clock::now();
    try {
        auto pair = ipc::make_socket_pair(SOCK_SEQPACKET);
        auto environment = warm.environment;
        environment[kTemplateFdVariable] = std::to_string(pair.second.get());
        LogFields about;
        about.pack = "template";
        warm.output = ChildOutput::open(io_, about);
        // A blank argument: the room its forked workers write their own command lines into.
        const std::vector<std::string> args{"-m", "comfy_supervisor.template", std::string(kTitleRoomBytes, ' ')};
        warm.process = spawn_process(
            SpawnRequest{warm.command, args, environment, "/", {pair.second.get()}, warm.output->write_end()});
        warm.output->start();
        warm.socket.assign(pair.first.release());
    } catch (const std::exception& e) {
        if (warm.process.pid > 0) {  // started, then something after it failed: not left unwatched
            ::kill(warm.process.pid, SIGKILL);
            while (::waitpid(warm.process.pid, nullptr, 0) < 0 && errno == EINTR) {
            }
            ::close(warm.process.pidfd);
            warm.process = SpawnedProcess{};
        }
        warm.state = Template::State::failed;
        log_warning(warm.name() + " cannot start (" + e.what() + "); its packs start cold");
        return;
    }
    watch_exit(warm);
    await_ready(warm);
}

void WarmTemplates::await_ready(Template& warm) {
    warm.ready_timer.expires_after(kReadyWithin);
    warm.ready_timer.async_wait([this, &warm](const boost::system::error_code& ec) {
        if (ec || warm.state != Template::State::starting) return;
        refuse(warm, "its imports did not end within " + std::to_string(kReadyWithin.count()) + " s");
    });
    warm.socket.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                           [this, &warm](const boost::system::error_code& ec) {
        if (ec || warm.state != Template::State::starting) return;
        std::string payload;
        try {
            payload = ipc::receive_with_descriptors(warm.socket.native_handle(), kAnswerBytes, 0).payload;
        } catch (const std::exception&) {
        }
        if (payload.empty()) return;  // its end closed: it exited, and its exit says how
        const auto said = nlohmann::json::parse(payload, nullptr, false);
        if (said.is_object() && said.contains("ready") && said["ready"].is_object()) {
            warm.state = Template::State::ready;
            warm.ready_timer.cancel();
            log_line(warm.name() + " ready: pid " + std::to_string(warm.process.pid) + ", its imports took " +
                     said["ready"].value("import_ms", nlohmann::json(0)).dump() + " ms");
            settle_if_done();
        } else if (said.is_object() && said.contains("failed") && said["failed"].is_string()) {
            refuse(warm, said["failed"].get<std::string>());
        } else {
            refuse(warm, "it said " + payload.substr(0, 200));
        }
    });
}

void WarmTemplates::refuse(Template& warm, const std::string& why) {
    warm.state = Template::State::failed;
    warm.ready_timer.cancel();
    log_warning(warm.name() + " cannot serve (" + why + "); its packs start cold");
    ::kill(warm.process.pid, SIGKILL);  // its exit is reaped by watch_exit
    settle_if_done();
}

void WarmTemplates::watch_exit(Template& warm) {
    warm.pidfd.assign(warm.process.pidfd);
    warm.pidfd.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                          [this, &warm](const boost::system::error_code& ec) {
        if (ec) return;
        int status = 0;
        while (::waitpid(warm.process.pid, &status, 0) < 0 && errno == EINTR) {
        }
        if (warm.output) warm.output->catch_up();
        ended(warm, describe_exit(WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                                  WIFSIGNALED(status) ? WTERMSIG(status) : 0));
    });
}

void WarmTemplates::ended(Template& warm, const std::string& how) {
    const auto was = warm.state;
    const bool lived = Clock::now() - warm.started_at >= kLivedLongEnough;
    warm.ready_timer.cancel();
    warm.pidfd.close();
    warm.socket.close();
    warm.process = SpawnedProcess{};
    warm.state = Template::State::failed;
    if (stopped_) return;
    if (was == Template::State::ready && lived) {
        log_warning(warm.name() + " " + how + "; its packs start cold until it is ready again");
        launch(warm);
        return;
    }
    if (was == Template::State::ready) {
        log_warning(warm.name() + " " + how + " within a minute of its start; its packs start cold");
    } else if (was == Template::State::starting) {
        log_warning(warm.name() + " " + how + " before it was ready; its packs start cold");
    }
    settle_if_done();
}

void WarmTemplates::settle_if_done() {
    if (!settled_) return;
    for (const auto& warm : templates_) {
        if (warm->state == Template::State::starting) return;
    }
    std::exchange(settled_, nullptr)();
}

WarmTemplates::Template* WarmTemplates::template_of(const PackConfig& pack) const {
    const auto found = by_pack_.find(pack.name);
    return found == by_pack_.end() ? nullptr : found->second;
}

SpawnedProcess WarmTemplates::start_process(const PackConfig& pack, const SpawnRequest& request,
                                            std::string& forked_from) {
    forked_from.clear();
    if (auto forked = fork(pack, request)) {
        forked_from = template_of(pack)->name();
        return *forked;
    }
    return spawn_process(with_sandbox(pack, request));
}

std::optional<SpawnedProcess> WarmTemplates::fork(const PackConfig& pack, const SpawnRequest& request) {
    Template* warm = template_of(pack);
    if (warm == nullptr || warm->state != Template::State::ready || request.output_fd < 0) return std::nullopt;
    const std::uint64_t number = next_request_++;
    auto argv = nlohmann::json::array({request.command});
    for (const auto& arg : request.args) argv.push_back(arg);
    const nlohmann::json message{{"fork", number},
                                 {"argv", argv},
                                 {"env", request.environment},
                                 {"cwd", request.working_directory},
                                 {"targets", request.inherited_fds}};
    std::vector<int> fds = request.inherited_fds;
    fds.push_back(request.output_fd);
    const int fd = warm->socket.native_handle();
    std::string broken;
    try {
        if (ipc::send_with_descriptors(fd, message.dump(), fds) != ipc::SendResult::sent) {
            broken = "it takes no request";
        } else if (pollfd answer{fd, POLLIN, 0}; ::poll(&answer, 1, static_cast<int>(kForkAnswer.count())) != 1) {
            broken = "it did not answer within " + std::to_string(kForkAnswer.count()) + " ms";
        } else {
            const auto reply = nlohmann::json::parse(ipc::receive_with_descriptors(fd, kAnswerBytes, 0).payload);
            if (reply.value("forked", nlohmann::json()) == number && reply.value("pid", 0) > 0) {
                const pid_t pid = reply["pid"].get<pid_t>();
                // Checked as anything read from another process: the pid must be a child of
                // ours (its middle process reaped), never any process the template names.
                if (ipc::parent_pid(pid) != ::getpid()) {
                    broken = "it named pid " + std::to_string(pid) + ", which is no child of the supervisor";
                } else if (const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); pidfd >= 0) {
                    ::setpgid(pid, pid);  // as the spawner does: the group exists before anyone signals it
                    return SpawnedProcess{pid, pidfd, -1};
                } else {
                    broken = std::string("its worker could not be watched (pidfd_open: ") + std::strerror(errno) + ")";
                    ::kill(pid, SIGKILL);  // our child, checked: its life's descriptors go to a cold start now
                }
            } else if (reply.value("refused", nlohmann::json()) == number) {
                log_warning(warm->name() + " could not fork a worker of pack " + pack.name + " (" +
                            reply.value("why", std::string("no reason given")) + "); it starts cold");
                return std::nullopt;
            } else {
                broken = "it answered " + reply.dump().substr(0, 200);
            }
        }
    } catch (const std::exception& e) {
        broken = e.what();
    }
    log_warning(warm->name() + " is ended: " + broken + "; pack " + pack.name + " starts cold");
    warm->state = Template::State::failed;
    ::kill(warm->process.pid, SIGKILL);
    return std::nullopt;
}

bool WarmTemplates::owns(pid_t pid) const {
    for (const auto& warm : templates_) {
        if (warm->process.pid == pid) return true;
    }
    return false;
}

void WarmTemplates::stop() {
    stopped_ = true;
    settled_ = nullptr;
    for (auto& warm : templates_) {
        if (warm->process.pid <= 0) continue;
        warm->socket.close();  // its loop reads the end and exits; the kill is for one that does not read
        ::kill(warm->process.pid, SIGKILL);
        while (::waitpid(warm->process.pid, nullptr, 0) < 0 && errno == EINTR) {
        }
        if (warm->output) warm->output->catch_up();
        warm->pidfd.close();
        warm->process = SpawnedProcess{};
        warm->state = Template::State::failed;
    }
}

}  // namespace comfy::supervisor
