// Arbiter traces: every event and decision kind survives the trip through JSON, a
// recorded session replays to the same decisions, an edited decision is caught and
// named by line, and a malformed trace is refused with a one-line message.
#include <catch2/catch.hpp>

#include "supervisor/arbiter/arbiter.hpp"
#include "supervisor/arbiter/trace.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

using namespace comfy;
using namespace comfy::arbiter;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
namespace fs = std::filesystem;

namespace {

// Through text, as replay reads it: numbers come back as JSON's, not as written.
TraceJson through_text(const TraceJson& line) { return TraceJson::parse(line.dump()); }

Snapshot busy_world() {
    return Snapshot{1234, 24 * kGiB, 3 * kGiB, {{1, {2 * kGiB, kGiB, 512 * kMiB}}, {7, {0, 0, 0}}}};
}

ModelRegistered model(std::uint64_t id, Bytes total, Bytes loaded) {
    return ModelRegistered{id, id, total, loaded, 0, static_cast<std::uint16_t>(ModelKind::diffusion), 0, 0};
}

AdmissionRequest load_of(Bytes bytes) {
    AdmissionRequest r{};
    r.streams = 1;
    r.bytes = bytes;
    return r;
}

// A trace file in the temporary folder, removed when the test ends.
class TempTrace {
public:
    TempTrace() : path_(fs::temp_directory_path() / ("comfy-trace-test-" + std::to_string(::getpid()) + ".jsonl")) {}
    ~TempTrace() {
        std::error_code ignored;
        fs::remove(path_, ignored);
    }
    TempTrace(const TempTrace&) = delete;
    TempTrace& operator=(const TempTrace&) = delete;

    std::string path() const { return path_.string(); }
    std::vector<std::string> lines() const {
        std::ifstream in(path_);
        std::vector<std::string> lines;
        for (std::string line; std::getline(in, line);) lines.push_back(line);
        return lines;
    }

private:
    fs::path path_;
};

std::string joined(const std::vector<std::string>& lines) {
    std::string text;
    for (const auto& line : lines) text += line + '\n';
    return text;
}

struct Replayed {
    int status;
    std::string decisions;
    std::string errors;
};

Replayed replay_text(const std::string& trace) {
    std::istringstream in(trace);
    std::ostringstream decisions;
    std::ostringstream errors;
    const int status = replay(in, decisions, errors);
    return {status, decisions.str(), errors.str()};
}

// A one-line message: exactly one newline, at its end.
bool one_line(const std::string& text) {
    return !text.empty() && text.find('\n') == text.size() - 1;
}

// The device and the owners as a script controls them, with every handled event recorded.
struct RecordedWorld {
    RecordedWorld(const std::string& path, ArbiterConfig config) : arbiter(config, 16), recorder(path, config, 16) {}

    Arbiter arbiter;
    TraceRecorder recorder;
    std::uint64_t now = 0;
    Bytes other_use = 0;
    std::map<std::pair<std::uint32_t, std::uint64_t>, Bytes> held;  // (slot, model) -> bytes on the device

    Snapshot snapshot() const {
        Bytes used = other_use;
        for (const auto& [key, bytes] : held) used += bytes;
        // The asker's allocator cache counts as free for it (free_for_asker).
        return Snapshot{now, 24 * kGiB, 24 * kGiB - used, {{1, {kGiB, kGiB / 2, 0}}}};
    }
    std::vector<Action> send(const Event& e) {
        const Snapshot world = snapshot();
        auto actions = arbiter.handle(e, world);
        recorder.record(e, world, actions);
        return actions;
    }
    void load(std::uint32_t slot, const ModelRegistered& m) {
        held[{slot, m.model_id}] = m.loaded_bytes;
        send(event::Registered{{slot, 1}, m});
        send(event::Residency{{slot, 1}, ResidencyReceipt{m.model_id, 1, m.loaded_bytes, 1, 0, 0, {}}});
    }
    std::vector<Action> answer(std::uint32_t slot, std::uint64_t id, Bytes asked, Bytes freed) {
        auto& bytes = held[{slot, id}];
        bytes -= std::min(bytes, freed);
        return send(event::Unloaded{{slot, 1}, UnloadReceipt{id, asked, freed, 2, bytes, 0, {}}});
    }
};

template <class A>
const A* first(const std::vector<Action>& actions) {
    for (const auto& a : actions) {
        if (const auto* x = std::get_if<A>(&a)) return x;
    }
    return nullptr;
}

// The bytes of the partial unload sent to `slot`.
Bytes asked_of(std::uint32_t slot, const std::vector<Action>& actions) {
    for (const auto& a : actions) {
        const auto* partial = std::get_if<action::SendPartialUnload>(&a);
        if (partial && partial->to.slot == slot) return partial->command.bytes;
    }
    FAIL("no partial unload sent to slot " << slot);
    return 0;
}

ArbiterConfig session_config() {
    ArbiterConfig config;
    config.no_fit = NoFitPolicy::wait;
    config.wait_timeout_ms = 1000;
    return config;
}

// A session touching every event kind and every decision kind: a partial unload that
// falls short ends in a detach, a busy owner is deferred, a waiting load times out.
void play_session(RecordedWorld& world) {
    for (std::uint32_t slot : {1u, 2u, 3u}) world.send(event::Joined{{slot, 1}});
    world.load(2, model(20, 12 * kGiB, 12 * kGiB));
    world.load(3, model(30, 6 * kGiB, 6 * kGiB));
    world.send(event::Busy{{3, 1}, true});
    world.other_use = 2 * kGiB;

    // Model 30 goes first (the smaller), but its owner is busy: model 20 is asked next.
    auto actions = world.send(event::Admission{{1, 1}, 1, load_of(4 * kGiB)});
    const Bytes asked = asked_of(2, actions);
    actions = world.answer(2, 20, asked, asked / 4);
    REQUIRE(first<action::SendDetach>(actions));
    actions = world.answer(2, 20, 12 * kGiB, 12 * kGiB);
    REQUIRE(first<action::Grant>(actions));
    world.held.erase({2, 20});
    world.send(event::Dropped{{2, 1}, 20});
    world.send(event::Busy{{3, 1}, false});

    // Nothing evictable (model 30 kept) and nothing else free: policy wait, then time-out.
    world.other_use = 18 * kGiB;
    actions = world.send(event::Admission{{2, 1}, 2, load_of(8 * kGiB), {machine_model_key(3, 30)}});
    // The ledger has nothing more to give: the idle sibling (slot 1; slot 3 holds the kept
    // model) is asked for a partial release, frees nothing, and the request then waits.
    const auto* release = first<action::SendPartialRelease>(actions);
    REQUIRE(release);
    CHECK(release->to.slot == 1);
    ReleaseReceipt nothing{};
    nothing.release_type = static_cast<std::uint16_t>(MessageType::partial_release);
    nothing.bytes_requested = release->command.bytes;
    actions = world.send(event::Released{{1, 1}, nothing});
    REQUIRE(first<action::Note>(actions));
    world.now = 1000;
    actions = world.send(event::Tick{});
    REQUIRE(first<action::Refuse>(actions));
    world.send(event::Left{{3, 1}});

    // An owner that lets its eviction time out is deaf until it answers; its late answer
    // frees what the waiting load needs.
    world.other_use = 0;
    world.load(1, model(10, 16 * kGiB, 16 * kGiB));
    actions = world.send(event::Admission{{2, 1}, 3, load_of(8 * kGiB)});
    const Bytes late = asked_of(1, actions);
    world.now = 1000 + ArbiterConfig{}.answer_timeout_ms;
    actions = world.send(event::Tick{});
    const auto* deaf = first<action::Deafness>(actions);
    REQUIRE(deaf);
    CHECK(deaf->deaf);
    actions = world.answer(1, 10, late, late);
    const auto* heard = first<action::Deafness>(actions);
    REQUIRE(heard);
    CHECK_FALSE(heard->deaf);
    REQUIRE(first<action::Grant>(actions));
}

// What the replay command prints on std::cout or std::cerr, kept out of the test's own
// output so that it can be checked.
class StreamCapture {
public:
    explicit StreamCapture(std::ostream& stream) : stream_(stream), saved_(stream.rdbuf(captured_.rdbuf())) {}
    ~StreamCapture() { stream_.rdbuf(saved_); }
    StreamCapture(const StreamCapture&) = delete;
    StreamCapture& operator=(const StreamCapture&) = delete;
    std::string text() const { return captured_.str(); }

private:
    std::ostream& stream_;
    std::ostringstream captured_;
    std::streambuf* saved_;
};

std::string replace_once(std::string text, const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("every event kind survives the trip through JSON") {
    ModelRegistered unknown_residency = model(10, 8 * kGiB, kUnknownBytes);
    unknown_residency.kind = static_cast<std::uint16_t>(ModelKind::text_encoder);
    unknown_residency.dynamic = 1;
    AdmissionRequest request = load_of(6 * kGiB);
    request.keep_loaded_count = 3;
    request.device = 2;
    request.streams = 3;
    request.largest_tensor = 300 * kMiB;
    request.pinned_bytes = kGiB;
    request.flags = kAdmitForDynamic;
    set_name(unknown_residency.name, "SD1ClipModel (clip_l.safetensors)");
    const std::vector<Event> events{
        event::Joined{{1, 2}, "sdxl"},
        event::Left{{3, 4}},
        event::Busy{{5, 6}, true},
        event::Registered{{7, 8}, unknown_residency},
        event::Residency{{1, 1}, ResidencyReceipt{10, 9, kUnknownBytes, 2, 1, 0, {}}},
        event::Residency{{1, 1}, ResidencyReceipt{10, 10, 3 * kGiB, 0, 0, 1, {}}},
        event::Dropped{{1, 1}, 10},
        event::Admission{{9, 3}, 77, request, {10, 11, 12}},
        event::Unloaded{{2, 1}, UnloadReceipt{20, kGiB, 0, 0, kUnknownBytes, 1, {}}},
        event::Unloaded{{2, 1}, UnloadReceipt{20, kGiB, 700 * kMiB, 4, 300 * kMiB, 0, {}}},
        event::Tick{},
    };
    for (const Event& original : events) {
        const TraceJson line = to_json(original, busy_world());
        CAPTURE(line.dump());
        const TraceEntry parsed = parse_event_line(through_text(line), 2);
        CHECK(parsed.event.index() == original.index());
        CHECK(to_json(parsed.event, parsed.snapshot) == line);
        CHECK(parsed.snapshot.participants.at(1).pinned == 512 * kMiB);
    }

    SECTION("unknown loaded bytes are written null and read back unknown, never zero") {
        const TraceJson line = to_json(events[3], busy_world());
        CHECK(line["loaded_bytes"].is_null());
        const TraceEntry entry = parse_event_line(line, 2);
        const auto& registered = std::get<event::Registered>(entry.event);
        CHECK(registered.report.loaded_bytes == kUnknownBytes);
        CHECK(registered.report.kind == static_cast<std::uint16_t>(ModelKind::text_encoder));
        CHECK(registered.report.dynamic == 1);
    }
    SECTION("names travel, and a line without them (recorded before they did) reads as none") {
        TraceJson joined = to_json(events[0], busy_world());
        CHECK(joined["name"] == "sdxl");
        TraceJson registered = to_json(events[3], busy_world());
        CHECK(registered["name"] == "SD1ClipModel (clip_l.safetensors)");
        joined.erase("name");
        registered.erase("name");
        CHECK(std::get<event::Joined>(parse_event_line(joined, 2).event).name.empty());
        CHECK(name_in(std::get<event::Registered>(parse_event_line(registered, 2).event).report.name).empty());
    }
    SECTION("keep_loaded is a list and for_dynamic a flag") {
        const TraceJson line = to_json(events[7], busy_world());
        CHECK(line["keep_loaded"] == TraceJson::array({10, 11, 12}));
        CHECK(line["for_dynamic"] == true);
        const TraceEntry entry = parse_event_line(line, 2);
        const auto& admission = std::get<event::Admission>(entry.event);
        CHECK(admission.correlation == 77);
        CHECK(admission.request.keep_loaded_count == 3);
        CHECK(admission.keep_loaded == std::vector<std::uint64_t>{10, 11, 12});
        CHECK(admission.request.flags == kAdmitForDynamic);
        CHECK(admission.request.largest_tensor == 300 * kMiB);
    }
}

TEST_CASE("every decision kind survives the trip through JSON") {
    AdmissionGrant grant{kGiB, 400 * kMiB, 5, static_cast<std::uint32_t>(VramState::low_vram), 0};
    AdmissionRefused refusal{9 * kGiB, kGiB, 20 * kGiB, static_cast<std::uint32_t>(RefusalReason::timed_out), 0};
    const std::vector<Action> actions{
        action::SendPartialUnload{{2, 1}, PartialUnload{20, 1234567}},
        action::SendDetach{{3, 2}, Detach{30}},
        action::Grant{{1, 1}, 7, grant},
        action::Refuse{{1, 1}, 8, refusal},
        action::Note{"owner slot 3 (generation 1) is busy"},
        action::Deafness{{4, 2}, true},
        action::Deafness{{4, 2}, false},
    };
    for (const Action& original : actions) {
        const TraceJson line = to_json(original);
        CAPTURE(line.dump());
        const Action parsed = parse_decision_line(through_text(line), 5);
        CHECK(parsed.index() == original.index());
        CHECK(to_json(parsed) == line);
    }
    CHECK(to_json(actions[2])["vram_state"] == "low_vram");
    CHECK(to_json(actions[5]) == TraceJson::parse(R"({"decision":"deaf","slot":4,"generation":2,"deaf":true})"));
    CHECK(std::get<action::Refuse>(parse_decision_line(to_json(actions[3]), 5)).refusal.reason ==
          static_cast<std::uint32_t>(RefusalReason::timed_out));
}

TEST_CASE("the header carries the config and the ledger capacity") {
    ArbiterConfig config;
    config.base_reserve = 1 * kGiB;
    config.no_fit = NoFitPolicy::wait;
    config.wait_timeout_ms = 123;
    config.answer_timeout_ms = 456;
    config.vram_state = VramState::high_vram;
    config.smart_memory = false;
    const TraceJson header = header_json(config, 48);
    CHECK(header["trace"] == "comfy-supervisor-arbiter");
    CHECK(header["version"] == 2);
    CHECK(header["config"]["no_fit"] == "wait");
    const TraceHeader parsed = parse_header(through_text(header), 1);
    CHECK(parsed.ledger_capacity == 48);
    CHECK(parsed.config.base_reserve == kGiB);
    CHECK(parsed.config.no_fit == NoFitPolicy::wait);
    CHECK(parsed.config.wait_timeout_ms == 123);
    CHECK(parsed.config.answer_timeout_ms == 456);
    CHECK(parsed.config.vram_state == VramState::high_vram);
    CHECK_FALSE(parsed.config.smart_memory);
}

TEST_CASE("a hand-written trace may give byte counts as sizes") {
    TraceJson line = to_json(event::Admission{{1, 1}, 1, load_of(0)}, busy_world());
    line["bytes"] = "20GiB";
    line["snapshot"]["device_free"] = "512 MiB";
    const auto entry = parse_event_line(line, 3);
    CHECK(std::get<event::Admission>(entry.event).request.bytes == 20 * kGiB);
    CHECK(entry.snapshot.device_free == 512 * kMiB);
}

TEST_CASE("a recorded session replays to the same decisions") {
    const TempTrace trace;
    {
        RecordedWorld world(trace.path(), session_config());
        play_session(world);
    }
    const auto lines = trace.lines();
    std::string recorded_decisions;
    for (const auto& line : lines) {
        if (line.starts_with("{\"decision\"")) recorded_decisions += line + '\n';
    }
    for (const char* kind : {"partial_unload", "detach", "grant", "refuse", "note", "deaf"}) {
        CHECK_THAT(recorded_decisions, Contains(std::string("\"decision\":\"") + kind + '"'));
    }

    const auto replayed = replay_text(joined(lines));
    CHECK(replayed.errors.empty());
    CHECK(replayed.status == kReplayAgreed);
    CHECK(replayed.decisions == recorded_decisions);

    SECTION("through the replay command") {
        const StreamCapture out(std::cout);
        CHECK(run_replay_command(trace.path()) == kReplayAgreed);
        CHECK(out.text() == recorded_decisions);
    }
}

TEST_CASE("replay names the line of the first recorded decision it disagrees with") {
    const TempTrace trace;
    {
        RecordedWorld world(trace.path(), session_config());
        play_session(world);
    }
    auto lines = trace.lines();
    std::size_t detach = 0;
    while (!lines[detach].starts_with("{\"decision\":\"detach\"")) ++detach;
    const std::string line_name = "line " + std::to_string(detach + 1) + ": ";

    SECTION("an edited decision") {
        lines[detach] = replace_once(lines[detach], "\"model_id\":20", "\"model_id\":21");
        const auto replayed = replay_text(joined(lines));
        CHECK(replayed.status == kReplayDiffered);
        CHECK(one_line(replayed.errors));
        CHECK_THAT(replayed.errors, StartsWith(line_name + "recorded {\"decision\":\"detach\""));
        CHECK_THAT(replayed.errors, Contains("\"model_id\":21} but replay decided {"));
    }
    SECTION("a decision the recording lacks") {
        lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(detach));
        const auto replayed = replay_text(joined(lines));
        CHECK(replayed.status == kReplayDiffered);
        CHECK(one_line(replayed.errors));
        CHECK_THAT(replayed.errors, Contains("but replay decided"));
    }
    SECTION("decisions missing before the first recorded one") {
        const auto is_decision = [](const std::string& line) { return line.starts_with("{\"decision\""); };
        const auto first_decision = std::find_if(lines.begin(), lines.end(), is_decision);
        const auto event_line = first_decision - lines.begin();  // 0-based index of the line before
        lines.erase(first_decision, std::find_if_not(first_decision, lines.end(), is_decision));
        const auto replayed = replay_text(joined(lines));
        CHECK(replayed.status == kReplayDiffered);
        CHECK_THAT(replayed.errors, StartsWith("line " + std::to_string(event_line) + ": recorded 0 decisions"));
    }
    SECTION("a trace of events alone has nothing to compare and replays") {
        std::erase_if(lines, [](const std::string& line) { return line.starts_with("{\"decision\""); });
        const auto replayed = replay_text(joined(lines));
        CHECK(replayed.errors.empty());
        CHECK(replayed.status == kReplayAgreed);
        CHECK_THAT(replayed.decisions, Contains("\"decision\":\"detach\""));
    }
}

TEST_CASE("a malformed trace is refused with a one-line message naming the line") {
    const std::string header = header_json(ArbiterConfig{}, 8).dump();
    const std::string joined_line = to_json(event::Joined{{1, 1}}, busy_world()).dump();
    const auto refused = [](const std::string& trace, const std::string& starts) {
        const auto replayed = replay_text(trace);
        CHECK(replayed.status == kTraceMalformed);
        CHECK(one_line(replayed.errors));
        CHECK_THAT(replayed.errors, StartsWith(starts));
        return replayed.errors;
    };
    SECTION("not JSON") { refused(header + '\n' + joined_line + "\n{\"event\": \n", "line 3: not valid JSON"); }
    SECTION("an unknown event kind") {
        const auto errors = refused(header + '\n' + replace_once(joined_line, "\"joined\"", "\"joined_late\""),
                                    "line 2: at /event: expected one of \"joined\", \"left\"");
        CHECK_THAT(errors, Contains("found \"joined_late\""));
    }
    SECTION("a missing field") {
        refused(header + '\n' + joined_line + '\n' + replace_once(joined_line, "\"slot\":1,", ""),
                "line 3: at /slot: expected a whole number up to 4294967295, found nothing");
    }
    SECTION("a field of the wrong type") {
        refused(header + '\n' + replace_once(joined_line, "\"device_free\":3221225472", "\"device_free\":true"),
                "line 2: at /snapshot/device_free: expected a byte count");
    }
    SECTION("a snapshot slot that is not a number") {
        refused(header + '\n' + replace_once(joined_line, "\"7\":", "\"seven\":"),
                "line 2: at /snapshot/participants/seven: expected a slot number as the key");
    }
    SECTION("a name no participant could have sent") {
        refused(header + '\n' + replace_once(joined_line, "\"name\":\"\"", "\"name\":\"a\\u0007b\""),
                "line 2: at /name: expected a name of at most 31 printable ASCII characters");
        refused(header + '\n' + replace_once(joined_line, "\"name\":\"\"", "\"name\":\"" + std::string(32, 'n') + "\""),
                "line 2: at /name: expected a name of at most 31 printable ASCII characters");
    }
    SECTION("another header version") {
        refused(replace_once(header, "\"version\":2", "\"version\":1") + '\n' + joined_line,
                "line 1: at /version: expected 2, found 1");
    }
    SECTION("no header") { refused(joined_line + '\n', "line 1: at /trace: expected \"comfy-supervisor-arbiter\""); }
    SECTION("an empty trace") { refused("", "line 1: at /: expected the trace header"); }
    SECTION("a decision before any event") {
        refused(header + '\n' + to_json(action::Note{"x"}).dump() + '\n', "line 2: at /decision: expected an event");
    }
    SECTION("a line that is neither") { refused(header + "\n[1, 2]\n", "line 2: at /: expected an event line"); }
}

TEST_CASE("the recorder refuses a file it cannot open with a one-line message") {
    try {
        TraceRecorder recorder("/nonexistent-folder/trace.jsonl", ArbiterConfig{}, 8);
        FAIL("no error");
    } catch (const TraceError& error) {
        const std::string message = error.what();
        CHECK(message == "/nonexistent-folder/trace.jsonl: cannot open for writing: No such file or directory");
    }
}

TEST_CASE("the replay command reports a trace it cannot read") {
    const StreamCapture errors(std::cerr);
    CHECK(run_replay_command("/nonexistent-folder/trace.jsonl") == kTraceMalformed);
    CHECK(run_replay_command(fs::temp_directory_path().string()) == kTraceMalformed);
    CHECK(errors.text() == "/nonexistent-folder/trace.jsonl: cannot read: No such file or directory\n" +
                               fs::temp_directory_path().string() +
                               ": cannot read: expected a regular file, found a directory\n");
}

TEST_CASE("the replay command refuses a FIFO or a device at once, never reading it") {
    // Before: /dev/zero was read into one line until memory ran out; a FIFO blocked.
    const TempTrace trace;
    REQUIRE(::mkfifo(trace.path().c_str(), 0600) == 0);
    const StreamCapture errors(std::cerr);
    CHECK(run_replay_command(trace.path()) == kTraceMalformed);
    CHECK(run_replay_command("/dev/zero") == kTraceMalformed);
    CHECK(errors.text() == trace.path() + ": cannot read: expected a regular file, found a FIFO (named pipe)\n" +
                               "/dev/zero: cannot read: expected a regular file, found a character device\n");
}

TEST_CASE("the replay command names the file in front of the line") {
    const TempTrace trace;
    std::ofstream(trace.path()) << header_json(ArbiterConfig{}, 8).dump() << "\n[1]\n";
    const StreamCapture errors(std::cerr);
    CHECK(run_replay_command(trace.path()) == kTraceMalformed);
    CHECK(errors.text() == trace.path() + ": line 2: at /: expected an event line or a decision line, found [1]\n");
}

TEST_CASE("a trace line nested too deep, with a number no double holds, or too long is refused by line") {
    const std::string header = header_json(ArbiterConfig{}, 8).dump();
    const std::string joined_line = to_json(event::Joined{{1, 1}}, busy_world()).dump();
    const auto refused = [](const std::string& trace) {
        const auto replayed = replay_text(trace);
        CHECK(replayed.status == kTraceMalformed);
        CHECK(one_line(replayed.errors));
        return replayed.errors;
    };
    // Before: 65,000 levels overflowed the stack, and 1E400 escaped as an exception (exit 134).
    CHECK(refused(header + '\n' + std::string(65000, '[') + std::string(65000, ']') + '\n') ==
          "line 2: at character 65: expected arrays and objects nested at most 64 deep, found one nested deeper\n");
    CHECK(refused(header + '\n' + replace_once(joined_line, "\"now_ms\":1234", "\"now_ms\":1E400")) ==
          "line 2: at character " + std::to_string(joined_line.find("1234") + 1) +
              ": expected a number a double holds (at most about 1.8E308), found 1E400\n");
    // A line is never read past its cap, whatever follows.
    CHECK(refused(header + '\n' + std::string(kMaxTraceLineBytes + 1, ' ') + joined_line) ==
          "line 2: expected a line of at most 32MiB, found a longer one\n");
}

TEST_CASE("lines of any length up to the cap are read whole, with or without a last newline") {
    const std::string header = header_json(ArbiterConfig{}, 8).dump();
    const std::string joined_line = to_json(event::Joined{{1, 1}}, busy_world()).dump();
    // Padded past the reader's 64 KiB chunks, and ending exactly at one.
    for (const std::size_t padding :
         {std::size_t{0}, 65535 - joined_line.size(), 65536 - joined_line.size(), std::size_t{200000}}) {
        INFO(padding);
        const std::string line = std::string(padding, ' ') + joined_line;
        CHECK(replay_text(header + '\n' + line + '\n').status == kReplayAgreed);
        CHECK(replay_text(header + '\n' + line).status == kReplayAgreed);
        CHECK(replay_text(header + "\n\n" + line).status == kTraceMalformed);  // an empty line is not JSON
    }
}

TEST_CASE("a difference names the lines, each cut short when long") {
    const std::string header = header_json(ArbiterConfig{}, 8).dump();
    const std::string joined_line = to_json(event::Joined{{1, 1}}, busy_world()).dump();
    // A note of a megabyte (with a character of two bytes across the cut) that replay never decided.
    const std::string text = std::string(969, 'n') + "\u00e9" + std::string(1'000'000, 'n');
    const std::string note = to_json(action::Note{text}).dump();
    const auto replayed = replay_text(header + '\n' + joined_line + '\n' + note + '\n');
    CHECK(replayed.status == kReplayDiffered);
    CHECK(one_line(replayed.errors));
    CHECK_THAT(replayed.errors, StartsWith("line 3: recorded {\"decision\":\"note\",\"text\":\"nnn"));
    CHECK_THAT(replayed.errors, Contains("nnn... but replay decided nothing more for the event on line 2"));
    CHECK(replayed.errors.size() < 1100);
}

TEST_CASE("a header asking for a ledger larger than a segment allows is refused before anything is allocated") {
    // Before: 4294967295 aborted on the allocation; 30,000,000 took 14 s and 2.6 GB.
    for (const std::string capacity : {"4294967295", "30000000", "1048577", "0"}) {
        INFO(capacity);
        const auto replayed =
            replay_text(replace_once(header_json(ArbiterConfig{}, 8).dump(), "\"ledger_capacity\":8",
                                     "\"ledger_capacity\":" + capacity) + '\n');
        CHECK(replayed.status == kTraceMalformed);
        CHECK(replayed.errors == "line 1: at /ledger_capacity: expected a ledger capacity the shared segment allows "
                                 "(ledger_entries is " + capacity + ", expected 1 to 1048576), found " + capacity + "\n");
    }
    CHECK(replay_text(header_json(ArbiterConfig{}, 1u << 20).dump() + '\n').status == kReplayAgreed);
}

TEST_CASE("the example trace replays with its recorded decisions") {
    std::ifstream example(EXAMPLE_TRACE);
    REQUIRE(example);
    std::ostringstream decisions;
    std::ostringstream errors;
    CHECK(replay(example, decisions, errors) == kReplayAgreed);
    CHECK(errors.str().empty());
    CHECK_THAT(decisions.str(), Contains("\"decision\":\"detach\""));
}
