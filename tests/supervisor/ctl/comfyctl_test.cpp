// comfyctl: the report read from the segment (fields validated, stale and busy records
// shown as such, device totals), its JSON and table forms, the command line, and the real
// binary against a live segment, a missing one, a stale one, a torn record and a
// supervisor stopped with SIGSTOP.
#include <catch2/catch.hpp>

#include "shared/message_payloads.hpp"
#include "shared/segment_layout.hpp"
#include "supervisor/ctl/control_protocol.hpp"
#include "supervisor/ctl/ctl_options.hpp"
#include "supervisor/ctl/events_text.hpp"
#include "supervisor/ctl/report_format.hpp"
#include "supervisor/ctl/report_json.hpp"
#include "supervisor/ctl/report_text.hpp"
#include "supervisor/ctl/segment_report.hpp"
#include "supervisor/ctl/top_view.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/test_instance.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#ifndef COMFYCTL_PATH
#error "COMFYCTL_PATH must name the comfyctl binary (set in tests/CMakeLists.txt)"
#endif

using namespace comfy;
using Catch::Matchers::Contains;
using comfy::test::ChildProcess;
using Json = nlohmann::json;

namespace {

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
const Capacities kCaps{8, 4, 4};

ParticipantRecord participant(const char* name, std::int32_t pid, std::uint32_t generation, ParticipantState state,
                              ParticipantKind kind = ParticipantKind::worker) {
    ParticipantRecord r{};
    std::strncpy(r.name, name, kPackNameBytes - 1);
    r.pid = pid;
    r.generation = generation;
    r.state = static_cast<std::uint8_t>(state);
    r.kind = static_cast<std::uint8_t>(kind);
    r.last_exit_status = -1;
    r.last_exit_signal = 0;
    r.node_classes = kNodeClassesUncounted;
    return r;
}

CensusRecord census(std::uint32_t generation, std::uint64_t device_used) {
    CensusRecord c{};
    c.generation = generation;
    c.device_used_bytes = device_used;
    return c;
}

// Writes a record as its one writer would (a fresh writer each time: the sequence goes odd,
// then even again, which is all a reader looks at).
template <class T>
void put(ipc::Seqlock<T>& lock, const T& value) {
    ipc::SeqlockWriter<T>(lock).write(value);
}

// The supervisor's report of a participant's census, as it publishes it for comfyctl.
void report_census(const SegmentView& view, std::uint32_t slot, const CensusRecord& census,
                   std::uint64_t heartbeat = 0, CensusStatus status = CensusStatus::ok) {
    CensusReport report{};
    report.census = census;
    report.heartbeat = heartbeat;
    report.status = static_cast<std::uint8_t>(status);
    put(view.participant(slot).census, report);
}

// Leaves a seqlock looking mid-write, as a writer that stopped or died inside write().
// Seqlock is standard layout and its sequence word comes first.
template <class T>
void tear(ipc::Seqlock<T>& lock) {
    static_assert(std::is_standard_layout_v<ipc::Seqlock<T>>);
    auto* sequence = reinterpret_cast<std::atomic<std::uint32_t>*>(&lock);
    sequence->fetch_add(1);
    REQUIRE((sequence->load() & 1u) == 1u);
}

// The table the tests below share: slots 0, 2, 3 and 5 in use, the others empty.
//   0: the host, ready, current census using 2 GiB of the device
//   2: a worker busy after a SIGKILL restart, census from its previous generation (stale)
//   3: a worker with an out-of-range state and a name without NUL
//   5: generation 0 but state dead (not empty: shown)
// What comfyctl reads of a segment a test created: its published copy, under its name.
SegmentView published_view(ipc::SharedSegment& segment) {
    return SegmentView(segment.published()->base(), view_of(segment).capacities());
}

void fill(const SegmentView& view, std::uint64_t now_ms) {
    auto host = participant("comfyui", 100, 1, ParticipantState::ready, ParticipantKind::host);
    host.started_at_ms = now_ms - 12'000;
    put(view.participant(0).record, host);
    auto c0 = census(1, 2 * kGiB);
    c0.pinned_bytes = 3 * kGiB / 2;
    c0.pinned_ceiling = 8 * kGiB;
    c0.pin_errors = 1;
    c0.bytes_evicted = 5 * kGiB;
    c0.bytes_evicted_active = 512 * kMiB;
    c0.churn = 2;
    c0.allocator_reserved = 3 * kGiB;
    c0.allocator_active = 2 * kGiB;
    c0.cast_buffer_bytes = 64 * kMiB;
    c0.resident_set_bytes = 700 * kMiB;
    c0.last_node = 17;
    c0.prompt_epoch = 9;
    report_census(view, 0, c0, 41);

    auto pack = participant("pack-a", 200, 3, ParticipantState::busy);
    std::strncpy(pack.last_node, "sample", kNodeNameBytes - 1);
    pack.restarts = 2;
    pack.last_exit_signal = SIGKILL;
    pack.started_at_ms = now_ms - 3 * 60'000 - 5'000;
    put(view.participant(2).record, pack);
    report_census(view, 2, census(2, 5 * kGiB), 7);  // the generation before the restart

    auto odd = participant("", 300, 4, ParticipantState::ready);
    std::memset(odd.name, 'x', kPackNameBytes);
    odd.state = 42;
    odd.last_exit_status = 3;
    put(view.participant(3).record, odd);
    report_census(view, 3, census(4, 1 * kGiB));  // current, but the state is not live

    auto gone = participant("old", 0, 0, ParticipantState::dead);
    put(view.participant(5).record, gone);
}

const ctl::WorkerRow& row_of(const ctl::SegmentReport& report, std::uint32_t slot) {
    for (const auto& row : report.workers) {
        if (row.slot == slot) return row;
    }
    FAIL("no worker row for slot " << slot);
    throw std::logic_error("unreachable");
}

const ctl::CensusRow& census_of(const ctl::SegmentReport& report, std::uint32_t slot) {
    for (const auto& row : report.census) {
        if (row.slot == slot) return row;
    }
    FAIL("no census row for slot " << slot);
    throw std::logic_error("unreachable");
}

// The real binary, run to completion with its stdout and stderr captured; killed after
// `limit` so that a comfyctl that blocks fails the test instead of hanging it.
struct Run {
    int status = -1;  // exit code, or 128 + signal
    bool timed_out = false;
    std::string out;
    std::string err;
};

Run run_comfyctl(const std::vector<std::string>& args, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    int out_pipe[2];
    int err_pipe[2];
    REQUIRE(::pipe2(out_pipe, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(err_pipe, O_CLOEXEC) == 0);
    std::vector<std::string> argv_strings{COMFYCTL_PATH};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);

    std::fflush(nullptr);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::dup2(out_pipe[1], STDOUT_FILENO);
        ::dup2(err_pipe[1], STDERR_FILENO);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);

    Run run;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    std::array<pollfd, 2> fds{{{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}}};
    std::array<std::string*, 2> sinks{&run.out, &run.err};
    int open_fds = 2;
    while (open_fds > 0) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            run.timed_out = true;
            ::kill(pid, SIGKILL);
            break;
        }
        if (::poll(fds.data(), fds.size(), static_cast<int>(left.count())) < 0 && errno != EINTR) break;
        for (std::size_t i = 0; i < fds.size(); ++i) {
            if (fds[i].fd < 0 || fds[i].revents == 0) continue;
            char buffer[4096];
            const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
            if (n > 0) {
                sinks[i]->append(buffer, static_cast<std::size_t>(n));
            } else if (n == 0 || errno != EINTR) {
                ::close(fds[i].fd);
                fds[i].fd = -1;
                --open_fds;
            }
        }
    }
    for (const auto& fd : fds) {
        if (fd.fd >= 0) ::close(fd.fd);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    run.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return run;
}

std::size_t line_count(const std::string& text) {
    std::size_t lines = 0;
    for (const char c : text) lines += c == '\n' ? 1 : 0;
    return lines;
}

}  // namespace

TEST_CASE("the report lists non-empty slots with validated fields") {
    auto segment = create_segment(test::test_instance("ctl"), kCaps, 24 * kGiB);
    const std::uint64_t now = ctl::wall_clock_ms();
    fill(view_of(segment), now);

    const auto report = ctl::read_report("here", segment);
    CHECK(report.instance == "here");
    CHECK(report.segment == segment.name());
    CHECK(report.supervisor_pid == ::getpid());
    CHECK(report.participant_slots == 8);
    REQUIRE(report.workers.size() == 4);
    CHECK(report.workers[0].slot == 0);
    CHECK(report.workers[1].slot == 2);
    CHECK(report.workers[2].slot == 3);
    CHECK(report.workers[3].slot == 5);

    const auto& host = row_of(report, 0);
    CHECK_FALSE(host.busy);
    CHECK(host.name == "comfyui");
    CHECK(host.name_valid);
    CHECK(host.kind == "host");
    CHECK(host.state == "ready");
    CHECK(host.live);
    CHECK(host.pid == 100);
    CHECK(host.generation == 1);
    CHECK(host.last_exit_status == -1);
    CHECK(host.started_at_ms == now - 12'000);

    const auto& pack = row_of(report, 2);
    CHECK(pack.kind == "worker");
    CHECK(pack.state == "busy");
    CHECK(pack.restarts == 2);
    CHECK(pack.last_exit_signal == SIGKILL);

    const auto& odd = row_of(report, 3);
    CHECK(odd.state == "invalid(42)");
    CHECK_FALSE(odd.live);
    CHECK(odd.name == std::string(kPackNameBytes - 1, 'x') + "?");
    CHECK_FALSE(odd.name_valid);

    const auto& gone = row_of(report, 5);
    CHECK(gone.state == "dead");
    CHECK(gone.generation == 0);
}

TEST_CASE("the ledger lists every model with its owner, newest load first, and distrusts bad rows") {
    auto segment = create_segment(test::test_instance("ctl"), kCaps, 24 * kGiB);
    const auto view = view_of(segment);
    fill(view, ctl::wall_clock_ms());
    LedgerRecord older{};
    older.model_id = 7;
    older.owner_slot = 2;
    older.owner_generation = 3;
    older.total_bytes = 6 * kGiB;
    older.loaded_bytes = 4 * kGiB;
    older.references = 2;
    older.load_order = 10;
    set_name(older.name, "SDXL (sd_xl_base_1.0.safetensors)");
    put(view.ledger(3).entry, older);
    LedgerRecord newer = older;
    newer.model_id = 8;
    newer.owner_slot = 0;
    newer.owner_generation = 1;
    newer.loaded_bytes = kUnknownBytes;
    newer.load_order = 11;
    set_name(newer.name, "");  // a model its owner named not
    put(view.ledger(1).entry, newer);
    LedgerRecord broken = older;
    broken.model_id = 9;
    broken.loaded_bytes = 9 * kGiB;  // more than its total
    broken.load_order = 3;
    put(view.ledger(2).entry, broken);
    LedgerRecord bad_name = older;  // a name no supervisor writes: not printable, no end
    bad_name.model_id = 10;
    bad_name.load_order = 2;
    std::memset(bad_name.name, 'a', sizeof bad_name.name);
    bad_name.name[1] = '\x1b';
    put(view.ledger(0).entry, bad_name);

    const auto report = ctl::read_report("here", segment);
    REQUIRE(report.ledger.size() == 4);
    CHECK(report.ledger[0].model_id == 8);
    CHECK(report.ledger[0].owner == "comfyui");
    CHECK_FALSE(report.ledger[0].loaded_bytes);  // unknown, not zero
    CHECK(report.ledger[1].model_id == 7);
    CHECK(report.ledger[1].owner == "pack-a");
    CHECK(report.ledger[1].row == 3);
    CHECK(*report.ledger[1].loaded_bytes == 4 * kGiB);
    CHECK(report.ledger[1].valid);
    CHECK(report.ledger[1].name == "SDXL (sd_xl_base_1.0.safetensors)");
    CHECK(report.ledger[0].name.empty());
    CHECK_FALSE(report.ledger[2].valid);
    CHECK_FALSE(report.ledger[3].valid);  // shown, not trusted
    CHECK(report.ledger[3].name == "a?" + std::string(kModelNameBytes - 3, 'a') + "?");

    const auto text = ctl::ledger_text(report);
    CHECK_THAT(text, Contains("unknown / 6.0 GiB"));
    CHECK_THAT(text, Contains("4.0 GiB / 6.0 GiB"));
    CHECK_THAT(text, Contains("invalid"));
    CHECK_THAT(text, Contains("  ok       SDXL (sd_xl_base_1.0.safetensors)\n"));
    CHECK_THAT(text, Contains("  ok       -\n"));
    const auto json = ctl::ledger_json(report);
    CHECK(json["ledger"][0]["loaded_bytes"].is_null());
    CHECK(json["ledger"][1]["loaded_bytes"] == 4 * kGiB);
    CHECK(json["ledger"][1]["model_id"] == 7);  // the number stays beside the name, for scripts
    CHECK(json["ledger"][1]["name"] == "SDXL (sd_xl_base_1.0.safetensors)");
    CHECK(json["ledger"][2]["status"] == "invalid");
    const auto top = ctl::top_frame(report, {std::nullopt, "12:34:56", 100});
    CHECK_THAT(top, Contains("      7  pack-a") && Contains("4.0 GiB / 6.0 GiB  SDXL (sd_xl_base_1.0.safetensors)"));
}

TEST_CASE("names, states and kinds out of range are shown, not trusted") {
    bool valid = true;
    char raw[kPackNameBytes] = "pa\x01" "ck\xff";
    CHECK(ctl::display_name(raw, valid) == "pa?ck?");
    CHECK_FALSE(valid);
    char plain[kPackNameBytes] = "pack_b-2";
    CHECK(ctl::display_name(plain, valid) == "pack_b-2");
    CHECK(valid);
    CHECK(ctl::state_name(0) == "empty");
    CHECK(ctl::state_name(6) == "failed");
    CHECK(ctl::state_name(7) == "stopped");
    CHECK(ctl::state_name(8) == "invalid(8)");
    CHECK(ctl::state_name(255) == "invalid(255)");
    CHECK(ctl::kind_name(1) == "host");
    CHECK(ctl::kind_name(2) == "invalid(2)");
    CHECK_FALSE(ctl::slot_in_use(ParticipantRecord{}));
}

TEST_CASE("a participant the arbiter passes over is shown deaf, and flag bits it does not know are left alone") {
    auto record = participant("filler", 300, 2, ParticipantState::ready);
    CHECK_FALSE(ctl::worker_row(1, record).deaf);
    record.flags = 0x8000;  // a later supervisor's flag
    CHECK_FALSE(ctl::worker_row(1, record).deaf);
    record.flags = kParticipantDeaf | 0x8000;
    const auto row = ctl::worker_row(1, record);
    CHECK(row.deaf);
    CHECK(row.state == "ready");
    ctl::SegmentReport report;
    report.instance = "here";
    report.workers.push_back(row);
    CHECK_THAT(ctl::workers_text(report, ctl::wall_clock_ms()), Contains("ready (deaf)"));
    CHECK(ctl::workers_json(report)["workers"][0]["deaf"] == true);
}

TEST_CASE("a participant's note (why it failed, a warning while it runs) is marked in its row, whole under the "
          "table, and in --json with its node classes") {
    const std::string warning = "warning: pack empty registered no node classes, so ComfyUI has none of its nodes";
    auto record = participant("empty", 300, 2, ParticipantState::ready);
    record.node_classes = 0;
    std::strncpy(record.note, warning.c_str(), kParticipantNoteBytes - 1);
    auto failed = participant("gone", 0, 1, ParticipantState::failed);
    const std::string why = "failed: it cannot start: pack gone's environment /e is missing: run comfyctl pack add "
                            "/p --name gone --config /c.json to build it; then comfyctl retry gone";
    std::strncpy(failed.note, why.c_str(), kParticipantNoteBytes - 1);
    failed.note[3] = '\x07';  // shown as '?', never sent to a terminal
    const auto plain = participant("example", 301, 1, ParticipantState::ready);
    ctl::SegmentReport report;
    report.instance = "here";
    std::uint32_t slot = 1;
    for (const auto& r : {record, failed, plain}) report.workers.push_back(ctl::worker_row(slot++, r));

    const auto text = ctl::workers_text(report, ctl::wall_clock_ms());
    CHECK_THAT(text, Contains("ready (!)"));
    CHECK_THAT(text, Contains("failed (!)"));
    CHECK_THAT(text, Contains("\n(!) empty: " + warning + "\n"));
    CHECK_THAT(text, Contains("\n(!) gone: fai?ed: it cannot start:"));
    CHECK_THAT(text, !Contains("(!) example"));  // nothing to say of the plain pack
    const auto json = ctl::workers_json(report)["workers"];
    CHECK(json[0]["note"] == warning);
    CHECK(json[0]["node_classes"] == 0);
    CHECK(json[1]["node_classes"].is_null());
    CHECK(json[2]["note"].is_null());
}

TEST_CASE("a pack busy in a callback shows so in workers and top, with how long, and no other state says callback") {
    const std::uint64_t now = ctl::wall_clock_ms();
    auto record = participant("hostile", 300, 2, ParticipantState::busy);
    record.flags = kParticipantInCallback;
    record.busy_since_ms = now - 42'000;
    ctl::SegmentReport report;
    report.instance = "here";
    report.workers.push_back(ctl::worker_row(1, record));
    ctl::CensusRow census;
    census.slot = 1;
    census.name = "hostile";
    report.census.push_back(census);
    CHECK(report.workers[0].in_callback);
    CHECK_THAT(ctl::workers_text(report, now), Contains("busy (callback, 42s)"));
    CHECK_THAT(ctl::top_frame(report, {std::nullopt, "12:34:56", 100, now}), Contains("callback 42s"));
    const auto json = ctl::workers_json(report)["workers"][0];
    CHECK(json["in_callback"] == true);
    CHECK(json["busy_since_ms"] == now - 42'000);

    // A node call: busy, since when in --json, no callback said.
    record.flags = 0;
    report.workers[0] = ctl::worker_row(1, record);
    CHECK_THAT(ctl::workers_text(report, now), !Contains("callback"));
    CHECK(ctl::workers_json(report)["workers"][0]["busy_since_ms"] == now - 42'000);
    // What another state's record holds of a busy stretch is not shown.
    record.flags = kParticipantInCallback;
    record.state = static_cast<std::uint8_t>(ParticipantState::ready);
    report.workers[0] = ctl::worker_row(1, record);
    CHECK_FALSE(report.workers[0].in_callback);
    CHECK(report.workers[0].busy_since_ms == 0);
    CHECK_THAT(ctl::top_frame(report, {std::nullopt, "12:34:56", 100, now}), !Contains("callback"));
}

TEST_CASE("census rows are current or stale, and the device adds up live current ones") {
    auto segment = create_segment(test::test_instance("ctl"), kCaps, 24 * kGiB);
    fill(view_of(segment), ctl::wall_clock_ms());

    const auto report = ctl::read_report("here", segment);
    REQUIRE(report.census.size() == 4);
    const auto& host = census_of(report, 0);
    CHECK(host.status == ctl::RecordStatus::ok);
    CHECK(host.name == "comfyui");
    CHECK(host.heartbeat == 41);
    CHECK(host.census.pinned_bytes == 3 * kGiB / 2);
    CHECK(host.census.last_node == 17);
    CHECK(census_of(report, 2).status == ctl::RecordStatus::stale);
    CHECK(census_of(report, 2).census.generation == 2);
    CHECK(census_of(report, 2).generation == 3);
    CHECK(census_of(report, 3).status == ctl::RecordStatus::ok);

    // Only slot 0 counts: slot 2 is stale, slot 3's state is not a live one.
    CHECK(report.device.total_bytes == 24 * kGiB);
    CHECK(report.device.used_bytes == 2 * kGiB);
    REQUIRE(report.device.free_bytes);
    CHECK(*report.device.free_bytes == 22 * kGiB);
}

TEST_CASE("a real device has no total in the segment and so no free figure") {
    auto segment = create_segment(test::test_instance("ctl"), kCaps, 0);
    fill(view_of(segment), ctl::wall_clock_ms());
    const auto report = ctl::read_report("here", segment);
    CHECK(report.device.total_bytes == 0);
    CHECK(report.device.used_bytes == 2 * kGiB);
    CHECK_FALSE(report.device.free_bytes);
    const auto json = ctl::census_json(report);
    CHECK(json["device"]["kind"] == "real");
    CHECK(json["device"]["free_bytes"].is_null());
    CHECK_THAT(ctl::census_text(report), Contains("device: real"));
}

TEST_CASE("a census claiming more than the device leaves zero free, not a wrapped number") {
    auto segment = create_segment(test::test_instance("ctl"), kCaps, 4 * kGiB);
    const auto view = view_of(segment);
    put(view.participant(1).record, participant("greedy", 10, 1, ParticipantState::ready));
    report_census(view, 1, census(1, UINT64_MAX));
    put(view.participant(4).record, participant("also", 11, 1, ParticipantState::ready));
    report_census(view, 4, census(1, 1));
    const auto report = ctl::read_report("here", segment);
    CHECK(report.device.used_bytes == UINT64_MAX);
    CHECK(*report.device.free_bytes == 0);
}

TEST_CASE("a torn record is reported busy, quickly, and nothing else is disturbed") {
    auto segment = create_segment(test::test_instance("ctl"), kCaps, 24 * kGiB);
    const auto view = view_of(segment);
    fill(view, ctl::wall_clock_ms());
    tear(view.participant(2).record);  // the supervisor stopped inside a participant write
    tear(view.participant(0).census);       // the host stopped inside its census write

    const auto start = std::chrono::steady_clock::now();
    const auto report = ctl::read_report("here", segment);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));

    REQUIRE(report.workers.size() == 4);
    CHECK(row_of(report, 2).busy);
    CHECK_FALSE(row_of(report, 0).busy);
    CHECK(census_of(report, 2).status == ctl::RecordStatus::busy);
    CHECK(census_of(report, 2).participant_busy);
    CHECK(census_of(report, 2).heartbeat == 7);
    CHECK(census_of(report, 0).status == ctl::RecordStatus::busy);
    CHECK_FALSE(census_of(report, 0).participant_busy);
    CHECK(census_of(report, 0).name == "comfyui");
    CHECK(report.device.used_bytes == 0);

    const auto workers = ctl::workers_json(report);
    CHECK(workers["workers"][1]["slot"] == 2);
    CHECK(workers["workers"][1]["status"] == "busy");
    CHECK(workers["workers"][1]["pid"].is_null());
    const auto json = ctl::census_json(report);
    CHECK(json["census"][0]["status"] == "busy");
    CHECK(json["census"][0]["name"] == "comfyui");
    CHECK(json["census"][0]["pinned_bytes"].is_null());
    CHECK(json["census"][0]["heartbeat"].is_null());  // in the same torn report
    CHECK(json["census"][1]["name"].is_null());

    CHECK_THAT(ctl::workers_text(report, ctl::wall_clock_ms()), Contains("busy: the record was being written"));
}

TEST_CASE("the JSON forms carry raw integers and every field") {
    auto segment = create_segment(test::test_instance("ctl"), kCaps, 24 * kGiB);
    const std::uint64_t now = ctl::wall_clock_ms();
    fill(view_of(segment), now);
    const auto report = ctl::read_report("here", segment);

    const auto workers = ctl::workers_json(report);
    CHECK(workers["instance"] == "here");
    CHECK(workers["segment"] == segment.name());
    CHECK(workers["supervisor_pid"] == ::getpid());
    REQUIRE(workers["workers"].size() == 4);
    const auto& pack = workers["workers"][1];
    CHECK(pack["slot"] == 2);
    CHECK(pack["status"] == "ok");
    CHECK(pack["name"] == "pack-a");
    CHECK(pack["kind"] == "worker");
    CHECK(pack["pid"] == 200);
    CHECK(pack["generation"] == 3);
    CHECK(pack["state"] == "busy");
    CHECK(pack["deaf"] == false);
    CHECK(pack["restarts"] == 2);
    CHECK(pack["last_exit_status"] == -1);
    CHECK(pack["last_exit_signal"] == 9);
    CHECK(pack["started_at_ms"] == now - 185'000);
    CHECK(pack["last_node_name"] == "sample");
    CHECK(workers["workers"][0]["last_node_name"].is_null());  // none the supervisor sent
    CHECK(workers["workers"][2]["state"] == "invalid(42)");

    const auto census = ctl::census_json(report);
    CHECK(census["device"]["total_bytes"] == 24 * kGiB);
    CHECK(census["device"]["used_bytes"] == 2 * kGiB);
    CHECK(census["device"]["free_bytes"] == 22 * kGiB);
    REQUIRE(census["census"].size() == 4);
    const auto& host = census["census"][0];
    CHECK(host["slot"] == 0);
    CHECK(host["name"] == "comfyui");
    CHECK(host["generation"] == 1);
    CHECK(host["status"] == "ok");
    CHECK(host["pinned_bytes"] == 3 * kGiB / 2);
    CHECK(host["pinned_ceiling"] == 8 * kGiB);
    CHECK(host["pin_errors"] == 1);
    CHECK(host["device_used_bytes"] == 2 * kGiB);
    CHECK(host["bytes_evicted"] == 5 * kGiB);
    CHECK(host["bytes_evicted_active"] == 512 * kMiB);
    CHECK(host["churn"] == 2);
    CHECK(host["allocator_reserved"] == 3 * kGiB);
    CHECK(host["allocator_active"] == 2 * kGiB);
    CHECK(host["cast_buffer_bytes"] == 64 * kMiB);
    CHECK(host["resident_set_bytes"] == 700 * kMiB);
    CHECK(host["last_node"] == 17);
    CHECK(host["prompt_epoch"] == 9);
    CHECK(host["heartbeat"] == 41);
    CHECK(census["census"][1]["status"] == "stale");
    // Valid JSON text even with a damaged name.
    CHECK_NOTHROW(Json::parse(census.dump()));
}

TEST_CASE("the tables show sizes, ages, exits and statuses for people") {
    auto segment = create_segment(test::test_instance("ctl"), kCaps, 24 * kGiB);
    const std::uint64_t now = ctl::wall_clock_ms();
    fill(view_of(segment), now);
    const auto report = ctl::read_report("here", segment);

    const auto workers = ctl::workers_text(report, now);
    CHECK_THAT(workers, Contains("supervisor pid " + std::to_string(::getpid())));
    CHECK_THAT(workers, Contains("comfyui"));
    CHECK_THAT(workers, Contains("signal 9 (SIGKILL)"));
    CHECK_THAT(workers, Contains("exit 3"));
    CHECK_THAT(workers, Contains("invalid(42)"));
    CHECK_THAT(workers, Contains("12s"));
    CHECK_THAT(workers, Contains("3m"));
    CHECK(line_count(workers) == 1 + 1 + 4);  // title, header, rows

    const auto census = ctl::census_text(report);
    CHECK_THAT(census, Contains("total 24 GiB, used 2.0 GiB, free 22 GiB"));
    CHECK_THAT(census, Contains("1.5 GiB"));
    CHECK_THAT(census, Contains("stale"));
    CHECK(line_count(census) == 1 + 1 + 1 + 4);  // title, device, header, rows

    const auto empty_segment = create_segment(test::test_instance("ctl"), kCaps, 24 * kGiB);
    CHECK_THAT(ctl::workers_text(ctl::read_report("e", empty_segment), now), Contains("no participants"));
}

TEST_CASE("ages and exits read as a person would say them") {
    CHECK(ctl::age_text(0, 5'000) == "-");
    CHECK(ctl::age_text(1'000, 13'500) == "12s");
    CHECK(ctl::age_text(1'000, 1'000 + 3 * 60'000 + 59'000) == "3m");
    CHECK(ctl::age_text(1'000, 1'000 + 5 * 3'600'000) == "5h");
    CHECK(ctl::age_text(1'000, 1'000 + 49 * 3'600'000ull) == "2d");
    CHECK(ctl::age_text(9'000, 1'000) == "0s");  // a clock that went back
    CHECK(ctl::exit_text(-1, 0) == "-");
    CHECK(ctl::exit_text(0, 0) == "exit 0");
    CHECK(ctl::exit_text(3, 0) == "exit 3");
    CHECK(ctl::exit_text(-1, SIGKILL) == "signal 9 (SIGKILL)");
    CHECK(ctl::exit_text(-1, SIGSEGV) == "signal 11 (SIGSEGV)");
    CHECK(ctl::exit_text(-1, 200) == "signal 200");
}

TEST_CASE("the command line: a command, an instance, --json, anywhere") {
    using ctl::parse_options;
    const auto defaults = parse_options({"workers"});
    CHECK(defaults.instance == "default");
    CHECK(defaults.command == ctl::Command::workers);
    CHECK_FALSE(defaults.json);
    const auto full = parse_options({"--json", "census", "--instance", "gpu-1"});
    CHECK(full.instance == "gpu-1");
    CHECK(full.command == ctl::Command::census);
    CHECK(full.json);
    CHECK(parse_options({"--instance=x_2", "workers"}).instance == "x_2");
    CHECK(parse_options({"--help"}).help);
    CHECK(parse_options({"--json", "-h"}).help);
    CHECK_THROWS_AS(parse_options({"bogus", "-h"}), ctl::UsageError);  // read in order: the bad command first
    CHECK(parse_options({"--version"}).version);
    const auto stop_help = parse_options({"stop", "--help"});
    CHECK(stop_help.help);
    CHECK_THAT(ctl::help_text(stop_help), Contains("usage: comfyctl [--instance NAME] stop NAME"));
    CHECK_THAT(ctl::help_text(stop_help), Contains("exit status"));
}

TEST_CASE("the command line: the supervisor's actions take a NAME, release takes --pins, events --follow") {
    using ctl::parse_options;
    const auto stop = parse_options({"stop", "sdxl", "--instance=gpu"});
    CHECK(stop.command == ctl::Command::stop);
    CHECK(stop.pack == "sdxl");
    CHECK(stop.instance == "gpu");
    CHECK(parse_options({"restart", "host"}).command == ctl::Command::restart);
    CHECK(parse_options({"start", "video"}).pack == "video");
    CHECK_FALSE(parse_options({"release", "video"}).pins);
    CHECK(parse_options({"release", "video", "--pins", "512MiB"}).pins == 512 * kMiB);
    CHECK(parse_options({"release", "--pins=4096", "video"}).pins == 4096);
    CHECK(parse_options({"events", "--follow"}).follow);
    CHECK(parse_options({"events", "-f", "--json"}).json);
    CHECK(parse_options({"events", "--failures"}).failures);
    CHECK_FALSE(parse_options({"events"}).failures);
    CHECK_THROWS_WITH(parse_options({"workers", "--failures"}), Contains("--failures does not apply to 'workers'"));
    CHECK(parse_options({"top"}).command == ctl::Command::top);
    CHECK(parse_options({"free"}).command == ctl::Command::free);
    CHECK(parse_options({"retry"}).command == ctl::Command::retry);
    CHECK(parse_options({"retry", "broken"}).pack == "broken");  // as the log's failed lines say
    CHECK_THROWS_WITH(parse_options({"retry", "a", "b"}), Contains("unexpected argument 'b'"));
    CHECK_THROWS_WITH(parse_options({"stop"}), Contains("stop needs a pack NAME; see comfyctl stop --help"));
    CHECK_THROWS_WITH(parse_options({"stop", "a", "b"}), Contains("unexpected argument 'b'"));
    CHECK_THROWS_WITH(parse_options({"free", "sdxl"}), Contains("unexpected argument 'sdxl'"));
    CHECK_THROWS_WITH(parse_options({"workers", "--pins", "1"}), Contains("--pins does not apply to 'workers'"));
    CHECK_THROWS_WITH(parse_options({"stop", "a", "--follow"}), Contains("--follow does not apply to 'stop'"));
    CHECK_THROWS_WITH(parse_options({"top", "--json"}), Contains("--json does not apply to 'top'"));
    CHECK_THROWS_WITH(parse_options({"release", "a", "--pins", "0"}), Contains("--pins expects a size"));
    CHECK_THROWS_WITH(parse_options({"release", "a", "--pins", "12GB"}), Contains("found '12GB'"));
    CHECK_THROWS_WITH(parse_options({"release", "a", "--pins"}), Contains("--pins needs a BYTES"));
    CHECK_THROWS_WITH(parse_options({"events", "--instance", "a", "--instance", "b"}), Contains("more than once"));
}

TEST_CASE("a bad command line is refused with the problem named") {
    using ctl::parse_options;
    CHECK_THROWS_WITH(parse_options({}), Contains("no command"));
    CHECK_THROWS_WITH(parse_options({"models"}), Contains("unknown command 'models'"));
    CHECK_THROWS_WITH(parse_options({"workers", "--verbose"}), Contains("unknown option '--verbose'"));
    CHECK_THROWS_WITH(parse_options({"workers", "--instance"}), Contains("--instance needs a NAME"));
    CHECK_THROWS_WITH(parse_options({"workers", "--verbose"}), Contains("; see comfyctl --help"));
    CHECK_THROWS_WITH(parse_options({"workers", "--follow"}), Contains("; see comfyctl workers --help"));
    CHECK_THROWS_WITH(parse_options({"--instance", "--json", "workers"}), Contains("--instance needs a NAME"));
    CHECK_THROWS_WITH(parse_options({"--instance=", "workers"}), Contains("--instance needs a NAME"));
    CHECK_THROWS_WITH(parse_options({"workers", "census"}), Contains("one command at a time"));
    CHECK_THROWS_WITH(parse_options({"--instance", "a/b", "workers"}), Contains("only letters, digits"));
}

TEST_CASE("every table fits 100 columns for five participants") {
    auto segment = create_segment(test::test_instance("ctl"), kCaps, 24 * kGiB);
    const auto view = view_of(segment);
    const std::uint64_t now = ctl::wall_clock_ms();
    const char* names[] = {"host", "sdxl", "video", "upscale", "bridge"};
    for (std::uint32_t slot = 0; slot < 5; ++slot) {
        auto record = participant(names[slot], 4'000'000 + static_cast<std::int32_t>(slot), 12, ParticipantState::stopped,
                                  slot == 0 ? ParticipantKind::host : ParticipantKind::worker);
        record.restarts = 123;
        record.last_exit_signal = SIGTERM;
        record.flags = kParticipantDeaf;  // the widest state shown
        record.started_at_ms = now - 50'000'000;
        put(view.participant(slot).record, record);
        CensusRecord c = census(12, 15 * kGiB + slot * 100 * kMiB);
        c.pinned_bytes = 9 * kGiB + 512 * kMiB;
        c.bytes_evicted = 999 * kGiB;
        c.allocator_reserved = 23 * kGiB;
        c.cast_buffer_bytes = 2 * kGiB;
        c.resident_set_bytes = 242 * kMiB;
        c.last_node = 12345;
        report_census(view, slot, c, 99'999, slot == 4 ? CensusStatus::unreadable : CensusStatus::ok);
    }
    for (std::uint32_t row = 0; row < 3; ++row) {  // models with the longest names a participant can send
        LedgerRecord model{};
        model.model_id = 100 + row;
        model.owner_slot = row;
        model.owner_generation = 12;
        model.total_bytes = 999 * kGiB;
        model.loaded_bytes = 123 * kGiB;
        model.load_order = row + 1;
        set_name(model.name, std::string(kModelNameBytes - 1, 'm'));
        put(view.ledger(row).entry, model);
    }
    const auto report = ctl::read_report("demo", segment);
    auto widest = [](const std::string& text) {
        std::size_t widest_line = 0;
        std::size_t start = 0;
        for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
            widest_line = std::max(widest_line, end - start);
        }
        return widest_line;
    };
    CHECK(widest(ctl::workers_text(report, now)) <= 100);
    CHECK(widest(ctl::census_text(report)) <= 100);
    CHECK(widest(ctl::ledger_text(report)) <= 100);
    CHECK_THAT(ctl::ledger_text(report), Contains("mmm...\n"));  // cut to fit; whole in --json
    const auto top = ctl::top_frame(report, {512 * kMiB, "12:34:56", 100});
    CHECK(widest(top) <= 100);
    CHECK(widest(ctl::top_frame(report, {std::nullopt, "12:34:56", 240})) <= 240);
    for (const char* name : names) CHECK_THAT(top, Contains(name));
    CHECK_THAT(top, Contains("reserve 512 MiB"));
    CHECK_THAT(top, Contains("[######"));
    CHECK_THAT(ctl::top_frame(report, {std::nullopt, "", 100}), Contains("reserve ?"));
    const nlohmann::json event = {{"seq", 7}, {"time", "2026-11-30T21:34:03.123Z"}, {"kind", "restarting"},
                                  {"pack", "upscale"}, {"text", std::string(150, 'x') + " and the rest of a long line"},
                                  {"figures", nlohmann::json::object()}};
    const auto line = ctl::event_text(event);
    CHECK(widest(line) <= 100);
    CHECK_THAT(line, Contains("21:34:03.123  restarting  upscale"));
    CHECK_THAT(line, Contains("the rest of a long line"));
    CHECK_THAT(ctl::event_text({{"kind", 3}}), Contains("?"));  // fields of the wrong type are not trusted
}

TEST_CASE("control requests are validated: known ops, their fields, bounded sizes") {
    using ctl::parse_request;
    const auto stop = parse_request(R"({"op": "stop", "pack": "sdxl"})");
    REQUIRE(std::holds_alternative<ctl::ControlRequest>(stop));
    CHECK(std::get<ctl::ControlRequest>(stop).op == ctl::Op::stop);
    CHECK(std::get<ctl::ControlRequest>(stop).pack == "sdxl");
    ctl::ControlRequest release;
    release.op = ctl::Op::release;
    release.pack = "video";
    release.pins = 4096;
    const auto round_trip = parse_request(ctl::request_line(release).substr(0, ctl::request_line(release).size() - 1));
    REQUIRE(std::holds_alternative<ctl::ControlRequest>(round_trip));
    CHECK(std::get<ctl::ControlRequest>(round_trip).pins == 4096u);
    const auto events = parse_request(R"({"op": "events", "since": 5, "follow": true})");
    REQUIRE(std::holds_alternative<ctl::ControlRequest>(events));
    CHECK(std::get<ctl::ControlRequest>(events).since == 5u);
    CHECK(std::get<ctl::ControlRequest>(events).follow);
    CHECK_FALSE(std::get<ctl::ControlRequest>(events).failures);
    ctl::ControlRequest failures;
    failures.op = ctl::Op::events;
    failures.failures = true;
    const auto failures_line = ctl::request_line(failures);
    const auto failures_back = parse_request(failures_line.substr(0, failures_line.size() - 1));
    REQUIRE(std::holds_alternative<ctl::ControlRequest>(failures_back));
    CHECK(std::get<ctl::ControlRequest>(failures_back).failures);
    auto refused = [](std::string_view line) {
        const auto parsed = parse_request(line);
        return std::holds_alternative<std::string>(parsed) ? std::get<std::string>(parsed) : std::string();
    };
    CHECK_THAT(refused(R"({"op": "reboot"})"), Contains("unknown op 'reboot'"));
    // What a client sent is shown on one line (found by fuzzing: a newline in the op).
    CHECK(refused(R"({"op": "re\nboot\u007f"})") == "unknown op 're?boot?'");
    CHECK(refused(R"({"op": "free", "a\nb": 1})") == "'free' takes no field 'a?b'");
    CHECK_THAT(refused("not json"), Contains("one JSON object"));
    CHECK_THAT(refused("[1, 2]"), Contains("one JSON object"));
    CHECK_THAT(refused(R"({"pack": "a"})"), Contains("needs an 'op'"));
    CHECK_THAT(refused(R"({"op": "stop"})"), Contains("'pack' must be a string"));
    CHECK_THAT(refused(R"({"op": "stop", "pack": ""})"), Contains("1 to 31 characters"));
    CHECK_THAT(refused(R"({"op": "stop", "pack": ")" + std::string(32, 'a') + R"("})"), Contains("1 to 31 characters"));
    CHECK_THAT(refused(R"({"op": "free", "pack": "a"})"), Contains("'free' takes no field 'pack'"));
    CHECK_THAT(refused(R"({"op": "release", "pack": "a", "pins": -1})"), Contains("'pins' must be"));
    CHECK_THAT(refused(R"({"op": "release", "pack": "a", "pins": 0})"), Contains("'pins' must be"));
    CHECK_THAT(refused(R"({"op": "events", "follow": 1})"), Contains("'follow' must be true or false"));
    CHECK_THAT(refused(R"({"op": "events", "failures": "yes"})"), Contains("'failures' must be true or false"));
    CHECK_THAT(refused(R"({"op": "events", "since": "x"})"), Contains("'since' must be"));
    CHECK_THAT(refused(std::string(ctl::kMaxRequestBytes, ' ')), Contains("at most 4096 bytes"));
    CHECK(ctl::error_named("unknown_pack") == ctl::ControlError::unknown_pack);
    CHECK_FALSE(ctl::error_named("nonsense"));
    const auto answer = nlohmann::json::parse(ctl::error_line(ctl::ControlError::refused, "no\xff"));
    CHECK(answer["ok"] == false);
    CHECK(answer["error"] == "refused");
}

TEST_CASE("comfyctl prints the workers and census of a live segment as JSON and tables") {
    const auto instance = test::test_instance("ctl");
    auto segment = create_segment(instance, kCaps, 24 * kGiB);
    fill(published_view(segment), ctl::wall_clock_ms());

    const auto workers = run_comfyctl({"--instance", instance, "workers", "--json"});
    REQUIRE(workers.status == 0);
    CHECK(workers.err.empty());
    const auto w = Json::parse(workers.out);
    CHECK(w["instance"] == instance);
    CHECK(w["segment"] == segment.name());
    CHECK(w["supervisor_pid"] == ::getpid());
    REQUIRE(w["workers"].size() == 4);
    CHECK(w["workers"][0]["name"] == "comfyui");
    CHECK(w["workers"][1]["last_exit_signal"] == 9);

    const auto census = run_comfyctl({"census", "--json", "--instance=" + instance});
    REQUIRE(census.status == 0);
    const auto c = Json::parse(census.out);
    CHECK(c["device"]["used_bytes"] == 2 * kGiB);
    CHECK(c["census"][1]["status"] == "stale");

    const auto table = run_comfyctl({"--instance", instance, "census"});
    REQUIRE(table.status == 0);
    CHECK_THAT(table.out, Contains("free 22 GiB"));
    CHECK_THAT(run_comfyctl({"--instance", instance, "workers"}).out, Contains("signal 9 (SIGKILL)"));
}

TEST_CASE("comfyctl without a supervisor fails with one line and status 1") {
    const auto instance = test::test_instance("absent");
    const auto run = run_comfyctl({"--instance", instance, "workers"});
    CHECK(run.status == 1);
    CHECK(run.out.empty());
    CHECK(line_count(run.err) == 1);
    CHECK_THAT(run.err, Contains(ipc::segment_name(instance) + ": shm_open failed: No such file or directory"));
    CHECK_THAT(run.err, Contains("is the supervisor running with this --instance?"));
}

TEST_CASE("comfyctl on a stale segment says so and how to clear it") {
    const auto instance = test::test_instance("ctl");
    const auto name = ipc::segment_name(instance);
    ChildProcess creator([&] {
        auto segment = create_segment(instance, kCaps);
        ::_exit(0);  // dies without removing it, as after SIGKILL
        return 0;
    });
    REQUIRE(creator.wait() == 0);
    const auto run = run_comfyctl({"--instance", instance, "census"});
    CHECK(run.status == 1);
    CHECK(line_count(run.err) == 1);
    CHECK_THAT(run.err, Contains("stale segment"));
    CHECK(ipc::remove_stale_segment(name));
}

TEST_CASE("comfyctl refuses a bad command line with status 2 and the usage") {
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"models"}, {"workers", "--verbose"}, {"workers", "--instance"}, {}, {"--instance", "a b", "census"}}) {
        INFO("args: " << Json(args).dump());
        const auto run = run_comfyctl(args);
        CHECK(run.status == 2);
        CHECK(run.out.empty());
        CHECK(line_count(run.err) == 1);
        CHECK_THAT(run.err, Contains("; see comfyctl"));
    }
    const auto help = run_comfyctl({"--help"});
    CHECK(help.status == 0);
    CHECK_THAT(help.out, Contains("usage: comfyctl"));
    CHECK_THAT(help.out, Contains("exit status"));
    CHECK(help.err.empty());
    for (const auto& command : {"workers", "census", "ledger", "top", "events", "free", "retry", "restart", "stop",
                                "start", "release"}) {
        INFO(command);
        const auto own = run_comfyctl({command, "-h"});
        CHECK(own.status == 0);
        CHECK_THAT(own.out, Contains(std::string("comfyctl [--instance NAME] ") + command));
        CHECK_THAT(own.out, Contains("exit status"));
        const auto version = run_comfyctl({command, "--version"});
        CHECK(version.status == 0);
        CHECK(version.out == std::string("comfyctl ") + COMFY_PROJECT_VERSION + "\n");
    }
}

namespace {

// Sets (or, with nullptr, unsets) an environment variable for one test, and puts it back.
class VariableFor {
public:
    VariableFor(const char* name, const char* value) : name_(name) {
        if (const char* saved = std::getenv(name)) saved_ = saved;
        value ? ::setenv(name, value, 1) : ::unsetenv(name);
    }
    ~VariableFor() { saved_ ? ::setenv(name_, saved_->c_str(), 1) : ::unsetenv(name_); }
    VariableFor(const VariableFor&) = delete;
    VariableFor& operator=(const VariableFor&) = delete;

private:
    const char* name_;
    std::optional<std::string> saved_;
};

}  // namespace

TEST_CASE("comfyctl pack runs the pack tool with this build's package: its output and exit status are the command's") {
    // The user's PYTHONPATH comes after ours: a comfy_supervisor of theirs would not be the tool's.
    const VariableFor path("PYTHONPATH", "/nonexistent-comfy-path");
    const auto help = run_comfyctl({"pack", "--help"}, std::chrono::seconds(60));
    CHECK(help.status == 0);
    CHECK_THAT(help.out, Contains("usage: comfyctl pack"));
    CHECK_THAT(help.out, Contains("add"));
    CHECK(help.err.empty());
    // The tool's own refusal: its one line and its status 2.
    const auto refused =
        run_comfyctl({"pack", "remove", "x", "--config", "/nonexistent/sv.json"}, std::chrono::seconds(60));
    CHECK(refused.status == 2);
    CHECK(refused.out.empty());
    CHECK(line_count(refused.err) == 1);
    CHECK_THAT(refused.err, Contains("comfyctl pack: cannot read the config /nonexistent/sv.json"));
    // comfyctl's own help lists it; pack takes no --instance and comes first.
    CHECK_THAT(run_comfyctl({"--help"}).out, Contains("  pack ...       isolate a pack"));
    const auto late = run_comfyctl({"--instance", "a", "pack", "add", "dir"});
    CHECK(late.status == 2);
    CHECK(line_count(late.err) == 1);
    CHECK_THAT(late.err, Contains("pack comes first and takes no --instance: comfyctl pack ARGS..."));
}

TEST_CASE("comfyctl env and adopt run the Python tool too: their own help, and a refusal in one line, status 2") {
    for (const std::string command : {"env", "adopt"}) {
        const auto help = run_comfyctl({command, "--help"}, std::chrono::seconds(60));
        CHECK(help.status == 0);
        CHECK_THAT(help.out, Contains("usage: comfyctl " + command));
        CHECK_THAT(run_comfyctl({"--help"}).out, Contains("  " + command + " ..."));
    }
    const auto refused = run_comfyctl({"adopt", "/nonexistent/ComfyUI", "--config", "/nonexistent/sv.json"},
                                      std::chrono::seconds(60));
    CHECK(refused.status == 2);
    CHECK(line_count(refused.err) == 1);
    CHECK_THAT(refused.err, Contains("comfyctl adopt: /nonexistent/ComfyUI is not a ComfyUI checkout"));
}

TEST_CASE("comfyctl pack without a Python to run the tool says what to install, in one line and status 1") {
    {
        const VariableFor tool("COMFY_SV_TOOL_PYTHON", "/nonexistent/python3");
        const auto run = run_comfyctl({"pack", "add", "dir"});
        CHECK(run.status == 1);
        CHECK(line_count(run.err) == 1);
        CHECK_THAT(run.err, Contains("comfyctl: cannot run COMFY_SV_TOOL_PYTHON=/nonexistent/python3 (No such file or "
                                     "directory); name a Python 3.11 or newer there"));
    }
    const VariableFor tool("COMFY_SV_TOOL_PYTHON", nullptr);
    const VariableFor path("PATH", "/nonexistent-bin");
    const auto run = run_comfyctl({"pack", "add", "dir"});
    CHECK(run.status == 1);
    CHECK(line_count(run.err) == 1);
    CHECK_THAT(run.err, Contains("comfyctl: comfyctl pack needs python3 (3.11 or newer) on PATH and there is none; "
                                 "install it (Debian: apt install python3 python3-yaml)"));
}

TEST_CASE("comfyctl shows a torn record as busy and still finishes") {
    const auto instance = test::test_instance("ctl");
    auto segment = create_segment(instance, kCaps, 24 * kGiB);
    const auto view = published_view(segment);
    fill(view, ctl::wall_clock_ms());
    tear(view.participant(0).record);
    tear(view.participant(2).census);

    const auto workers = run_comfyctl({"--instance", instance, "workers", "--json"}, std::chrono::seconds(5));
    REQUIRE_FALSE(workers.timed_out);
    REQUIRE(workers.status == 0);
    const auto w = Json::parse(workers.out);
    CHECK(w["workers"][0]["status"] == "busy");
    CHECK(w["workers"][1]["status"] == "ok");

    const auto census = run_comfyctl({"--instance", instance, "census", "--json"}, std::chrono::seconds(5));
    REQUIRE_FALSE(census.timed_out);
    REQUIRE(census.status == 0);
    const auto c = Json::parse(census.out);
    CHECK(c["census"][0]["status"] == "busy");
    CHECK(c["census"][1]["status"] == "busy");
    CHECK(c["census"][1]["name"] == "pack-a");

    const auto table = run_comfyctl({"--instance", instance, "workers"}, std::chrono::seconds(5));
    CHECK(table.status == 0);
    CHECK_THAT(table.out, Contains("busy: the record was being written"));
}

TEST_CASE("comfyctl reads the segment of a supervisor stopped with SIGSTOP") {
    const auto instance = test::test_instance("ctl");
    const auto name = ipc::segment_name(instance);
    // Destroyed after the child (declared first): the killed creator leaves its segment.
    struct RemoveWhenStale {
        std::string name;
        ~RemoveWhenStale() { ipc::remove_stale_segment(name); }
    } cleanup{name};
    int ready[2];
    REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);

    ChildProcess supervisor([&]() -> int {
        ::close(ready[0]);
        auto segment = create_segment(instance, kCaps, 24 * kGiB);
        fill(published_view(segment), ctl::wall_clock_ms());
        const char byte = 1;
        if (::write(ready[1], &byte, 1) != 1) return 1;
        for (;;) ::pause();
    });
    ::close(ready[1]);
    pollfd wait_ready{ready[0], POLLIN, 0};
    REQUIRE(::poll(&wait_ready, 1, 10'000) == 1);
    char byte = 0;
    REQUIRE(::read(ready[0], &byte, 1) == 1);
    ::close(ready[0]);

    supervisor.kill(SIGSTOP);
    int status = 0;
    REQUIRE(::waitpid(supervisor.pid(), &status, WUNTRACED) == supervisor.pid());  // reports the stop, reaps nothing
    REQUIRE(WIFSTOPPED(status));

    const auto workers = run_comfyctl({"--instance", instance, "workers", "--json"}, std::chrono::seconds(5));
    const auto census = run_comfyctl({"--instance", instance, "census", "--json"}, std::chrono::seconds(5));

    supervisor.kill(SIGCONT);
    supervisor.kill(SIGKILL);
    CHECK(supervisor.wait() == 128 + SIGKILL);

    REQUIRE_FALSE(workers.timed_out);
    REQUIRE(workers.status == 0);
    const auto w = Json::parse(workers.out);
    CHECK(w["supervisor_pid"] == supervisor.pid());
    REQUIRE(w["workers"].size() == 4);
    CHECK(w["workers"][1]["name"] == "pack-a");
    REQUIRE_FALSE(census.timed_out);
    REQUIRE(census.status == 0);
    const auto c = Json::parse(census.out);
    CHECK(c["device"]["used_bytes"] == 2 * kGiB);
    CHECK(c["census"][0]["heartbeat"] == 41);

    CHECK(ipc::remove_stale_segment(name));
}
