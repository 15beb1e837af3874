// The segment's own integrity against another process of the supervisor's user, outside
// every sandbox (a pack's worker without one, or anything else the user runs), which can
// open the segment's name writable: what it writes there never decides who is live, and
// truncating it harms neither the supervisor nor its workers.
#include <catch2/catch.hpp>

#include "ipc/shm_segment.hpp"
#include "tests/support/sanitizer_reports.hpp"
#include "tests/support/supervisor_process.hpp"

#include <fcntl.h>
#include <sys/mman.h>
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
