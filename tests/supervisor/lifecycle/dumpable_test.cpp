// The supervisor is not dumpable, so the kernel gives what is in its /proc folder to root:
// another process of its user cannot open its fd/, mem or environ. Its workers are
// dumpable again after their exec. Root could read them either way, so when the tests run
// as root the supervisor (and the process that tries) run as nobody here.
#include <catch2/catch.hpp>

#include "tests/support/supervisor_process.hpp"
#include "tests/support/test_instance.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

using namespace comfy::test;
using nlohmann::json;

namespace {

constexpr uid_t kNobody = 65534;

uid_t owner_of(const std::filesystem::path& path) {
    struct stat status {};
    return ::stat(path.c_str(), &status) == 0 ? status.st_uid : static_cast<uid_t>(-1);
}

// The real uid on the Uid: line of /proc/PID/status.
uid_t real_uid_of(pid_t pid) {
    std::istringstream lines(read_file("/proc/" + std::to_string(pid) + "/status"));
    std::string key;
    for (std::string line; std::getline(lines, line);) {
        std::istringstream fields(line);
        uid_t uid = 0;
        if (fields >> key && key == "Uid:" && fields >> uid) return uid;
    }
    return static_cast<uid_t>(-1);
}

// Whether a process of `user` (this one, or a child that becomes `user` when this one is
// root) can list the folder: what a same-user worker could do to the supervisor.
bool user_can_list(uid_t user, const std::filesystem::path& folder) {
    ChildProcess child([&] {
        if (::geteuid() != user && (::setgroups(0, nullptr) != 0 || ::setresgid(user, user, user) != 0 ||
                                    ::setresuid(user, user, user) != 0)) {
            return 2;
        }
        DIR* listing = ::opendir(folder.c_str());
        if (listing == nullptr) return 1;
        ::closedir(listing);
        return 0;
    });
    const int code = child.wait();
    REQUIRE(code != 2);
    return code == 0;
}

}  // namespace

TEST_CASE("the supervisor's /proc entries are root's, its workers' their own") {
    const uid_t user = ::geteuid() == 0 ? kNobody : ::geteuid();
    TempFolder folder("dumpable");
    const auto pack_folder = folder.path() / "pack";
    std::filesystem::create_directory(pack_folder);
    std::filesystem::permissions(pack_folder, std::filesystem::perms::all);  // the worker writes its report here
    const json config = {{"device", simulated_device()},
                         {"limits", {{"handshake_timeout_ms", 600000}, {"shutdown_grace_ms", 500}}},
                         {"packs", {{{"name", "probe"}, {"command", SANDBOX_PROBE_PATH},
                                     {"working_directory", pack_folder.string()}}}}};
    const auto config_file = folder.write("config.json", config.dump());
    const auto log_file = (folder.path() / "log.txt").string();
    const std::string instance = test_instance("dumpable");
    ChildProcess supervisor([&] {
        const int log_fd = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ::dup2(log_fd, STDERR_FILENO);
        if (::geteuid() == 0 && (::setgroups(0, nullptr) != 0 || ::setresgid(kNobody, kNobody, kNobody) != 0 ||
                                 ::setresuid(kNobody, kNobody, kNobody) != 0)) {
            return 126;
        }
        const std::string binary = supervisor_binary();
        const std::string file = config_file.string();
        ::execl(binary.c_str(), binary.c_str(), "run", "--config", file.c_str(), "--instance", instance.c_str(),
                nullptr);
        return 127;
    });
    const auto report_file = pack_folder / "report.txt";
    REQUIRE(eventually([&] { return std::filesystem::exists(report_file); }, std::chrono::seconds(10)));
    INFO(read_file(log_file));

    // The folder /proc/PID keeps the process's user (the kernel's rule, for ps); what is
    // in it is root's.
    const auto proc = std::filesystem::path("/proc") / std::to_string(supervisor.pid());
    CHECK(real_uid_of(supervisor.pid()) == user);
    CHECK(owner_of(proc) == user);
    for (const char* entry : {"fd", "environ", "mem"}) {
        INFO(entry);
        CHECK(owner_of(proc / entry) == 0);
    }
    CHECK_FALSE(user_can_list(user, proc / "fd"));
    // The worker, exec'd from it, is dumpable again: its /proc is its user's.
    const auto report = read_key_values(report_file);
    CHECK(report.at("dumpable") == "1");
    const auto worker_proc = std::filesystem::path("/proc") / report.at("pid");
    CHECK(owner_of(worker_proc / "fd") == user);
    CHECK(user_can_list(user, worker_proc / "fd"));

    supervisor.kill(SIGTERM);
    CHECK(supervisor.wait() == 0);
}
