// The segment's own integrity against another process of the supervisor's user, outside
// every sandbox (a pack's worker without one, or anything else the user runs), which can
// open the segment's name writable or remove it: what it writes there never decides who is
// live, removing the name lets no second supervisor in, and truncating it harms neither
// the supervisor nor its workers.
#include <catch2/catch.hpp>

#include "ipc/shm_segment.hpp"
#include "supervisor/ctl/control_path.hpp"
#include "tests/support/sanitizer_reports.hpp"
#include "tests/support/supervisor_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>

using namespace comfy;
using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

// The instance's segment opened by its name, writable, as any process of the user can.
int open_by_name(const std::string& instance) {
    return ::shm_open(ipc::segment_name(instance).c_str(), O_RDWR | O_CLOEXEC, 0);
}

// Whether `pack` is up in the supervisor's table with the pid it had.
bool still_up(const SupervisorProcess& supervisor, const std::string& pack, pid_t pid) {
    const auto found = supervisor.participant(pack);
    return found && found->pid == pid && found->state == ParticipantState::ready;
}

}  // namespace

TEST_CASE("a second supervisor of a live instance refuses with one line and status 2, whatever its header says") {
    TempFolder packs("twice");
    const json config = memory_config_of(json::array({reference_pack(packs, "steady", idle_pack())}));
    SupervisorProcess first(config);
    REQUIRE(first.wait_for_state("steady", ParticipantState::ready, std::chrono::seconds(30)));
    const pid_t worker = first.participant("steady")->pid;

    // Another process of the user makes the header name a creator that is gone.
    ChildProcess gone([] { return 0; });
    REQUIRE(gone.wait() == 0);
    const int fd = open_by_name(first.instance());
    REQUIRE(fd >= 0);
    const std::int32_t dead = gone.pid();
    CHECK(::pwrite(fd, &dead, sizeof dead, offsetof(ipc::SegmentHeader, creator_pid)) == sizeof dead);
    ::close(fd);

    const auto file = packs.write("second.json", with_sanitizer_environment(config).dump());
    const auto second = run_and_capture("timeout 30 " + supervisor_binary() + " run --config " + file.string() +
                                        " --instance " + first.instance() + " 2>&1");
    INFO(second.output);
    CHECK(second.status == 2);
    CHECK(count_of(second.output, "\n") == 1);
    CHECK_THAT(second.output, Contains("in use by a live supervisor"));
    // The first goes on, with its worker and its segment.
    CHECK(process_exists(worker));
    CHECK(still_up(first, "steady", worker));
    CHECK(first.stop() == 0);
}

TEST_CASE("a second supervisor refuses while the first lives after the segment's name is removed, and leaves the "
          "first's control socket alone") {
    TempFolder packs("unnamed");
    const json config = memory_config_of(json::array({reference_pack(packs, "steady", idle_pack())}));
    SupervisorProcess first(config);
    REQUIRE(first.wait_for_state("steady", ParticipantState::ready, std::chrono::seconds(30)));
    const pid_t worker = first.participant("steady")->pid;
    const auto socket = ctl::control_socket_path(first.instance());
    struct stat made {};
    REQUIRE(::stat(socket.c_str(), &made) == 0);

    // Stopped, the first cannot publish its copy again before the second starts: the worst
    // case. Then another process of the user removes the name, and with it the file whose
    // lock said the instance was taken (there is no other file to remove).
    first.kill(SIGSTOP);
    const std::string name = ipc::segment_name(first.instance());
    const bool removed = ::shm_unlink(name.c_str()) == 0;
    const auto file = packs.write("second.json", with_sanitizer_environment(config).dump());
    const auto second = run_and_capture("timeout 30 " + supervisor_binary() + " run --config " + file.string() +
                                        " --instance " + first.instance() + " 2>&1");
    first.kill(SIGCONT);
    REQUIRE(removed);
    INFO(second.output);
    CHECK(second.status == 2);
    CHECK(count_of(second.output, "\n") == 1);
    // Refused on the instance's lock, before it made anything (not later, on the control socket).
    CHECK_THAT(second.output, Contains("in use by a live supervisor (it holds the instance's lock @comfy-sv-"));

    // The first's control socket is still the one it made, and comfyctl reaches it.
    struct stat now {};
    CHECK(::stat(socket.c_str(), &now) == 0);
    CHECK(now.st_ino == made.st_ino);
    const auto events = run_and_capture(comfyctl_binary() + " --instance " + first.instance() + " events 2>&1");
    CHECK(events.status == 0);
    CHECK_THAT(events.output, Contains("TIME (UTC)"));
    // And readers by name get the first's copy back.
    CHECK(eventually([&] { return first.log().find("published it again") != std::string::npos; },
                     std::chrono::seconds(30)));
    CHECK(still_up(first, "steady", worker));
    CHECK(first.stop() == 0);
}

TEST_CASE("truncating the segment's name harms neither the supervisor nor its workers, and readers get it back") {
    TempFolder packs("truncate");
    const json honest = {{"nodes", {{"work", {step_load("weights", "6GiB"), step_compute(50)}}}}};
    SupervisorProcess supervisor(memory_config_of(json::array({reference_pack(packs, "steady", honest)})),
                                 workload_of({{node("steady", "work")}, {node("steady", "work")}}),
                                 {}, {"--keep-running"});
    REQUIRE(supervisor.wait_for_state("steady", ParticipantState::ready, std::chrono::seconds(30)));
    const pid_t worker = supervisor.participant("steady")->pid;

    const int fd = open_by_name(supervisor.instance());
    REQUIRE(fd >= 0);
    CHECK(::ftruncate(fd, 0) == 0);
    ::close(fd);

    // The supervisor finds it at its next check and publishes the segment again.
    CHECK(eventually([&] { return supervisor.log().find("published it again") != std::string::npos; },
                     std::chrono::seconds(30)));
    CHECK(eventually([&] { return still_up(supervisor, "steady", worker); }, std::chrono::seconds(30)));
    CHECK(process_exists(worker));
    // The prompts ran whenever the truncation came.
    CHECK(eventually([&] { return supervisor.output().find("prompts run") != std::string::npos; },
                     std::chrono::seconds(60)));
    CHECK_THAT(supervisor.output(), Contains("prompts run        2 of 2 (0 failed)"));
    const auto log = supervisor.log();
    INFO(log);
    CHECK(supervisor.stop() == 0);
    CHECK_THAT(log, !Contains("killed by"));
}
