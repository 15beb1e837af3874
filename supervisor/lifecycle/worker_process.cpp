#include "supervisor/lifecycle/worker_process.hpp"

#include "supervisor/config/install_layout.hpp"
#include "supervisor/lifecycle/start_failures.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>

namespace comfy::supervisor {

void WorkerProcess::open_region(const SegmentView& segment) {
    const std::uint32_t ring_slots = segment.capacities().ring_slots;
    region = ipc::SealedRegion::create("comfy-sv-slot-" + std::to_string(slot),
                                       ParticipantRegionMap::compute(ring_slots).total_bytes, ipc::Access::read_only);
    region_view = ParticipantRegionView(region.base(), ring_slots);
    ipc::ring_initialize_producer_side<MessageSlot>(segment.to_participant_producer_side(slot), ring_slots);
    ipc::ring_initialize_consumer_side(segment.from_participant_consumer_side(slot));
    to_worker.emplace(to_participant_ring(segment, region_view, slot), ring_slots);
    from_worker.emplace(from_participant_ring(segment, region_view, slot), ring_slots);
    outbox.clear();
    answers_due.clear();
}

void WorkerProcess::close_region() {
    to_worker.reset();
    from_worker.reset();
    region_view = ParticipantRegionView();
    region = ipc::SealedRegion();
}

bool WorkerProcess::exited() const {
    if (!alive()) return false;
    pollfd exit{process.pidfd, POLLIN, 0};
    return ::poll(&exit, 1, 0) == 1;
}

std::string WorkerProcess::reap() {
    int status = 0;
    const pid_t pid = process.pid;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    // What it wrote before it ended is in the pipe now: logged before its end is.
    if (output) output->catch_up();
    // Whatever the worker left in its group goes with it.
    ::killpg(pid, SIGKILL);
    const StartFailure start = take_start_failure(process);
    pidfd.close();  // closes the pidfd
    process = SpawnedProcess{};
    handshake_timer.cancel();
    kill_timer.cancel();
    deaf = false;
    last_exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    last_exit_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;

    std::string how = describe_exit(last_exit_status, last_exit_signal);
    if (start.step != StartFailure::Step::none) {
        const std::string what = start_failure_text(pack, start);
        how += ": " + what;
        if (start_failure_lasts(start)) cannot_start = what;
    }
    if (!kill_reason.empty()) how += " (" + kill_reason + ")";
    return how;
}

std::string WorkerProcess::why_given_up() const {
    // Its own last line says why, where the operator reads this one: comfyctl events, the
    // dashboard, the host's node error, long after the log's line above has scrolled away.
    if (!cannot_start.empty()) {
        return "it cannot start: " + cannot_start + "; then comfyctl retry " + pack.name;
    }
    const std::string said = output ? output->last_line() : std::string();
    if (last_exit_status == kExitCannotRun) {
        return "it exited with status " + std::to_string(kExitCannotRun) + " (it cannot run as configured: " +
               (said.empty() ? std::string("it wrote no line saying why") : "\"" + said + "\"") +
               "); not restarting until an operator asks (comfyctl retry " + pack.name + ")";
    }
    return "more than " + std::to_string(pack.restart.max_restarts) + " restarts within " +
           std::to_string(pack.restart.window.count()) + " ms" +
           (said.empty() ? std::string() : " (its last line: \"" + said + "\")") +
           "; not restarting until an operator asks";
}

namespace {

// `text` as the record's note holds it: printable ASCII (a child's own line may be
// anything), cut to fit with "..." at its end.
void copy_note(const std::string& text, char (&note)[kParticipantNoteBytes]) {
    constexpr std::size_t room = kParticipantNoteBytes - 1;
    std::size_t length = 0;
    for (; length < text.size() && length < room; ++length) {
        const auto byte = static_cast<unsigned char>(text[length]);
        note[length] = byte >= 0x20 && byte <= 0x7e ? static_cast<char>(byte) : '?';
    }
    if (text.size() > room) std::memcpy(note + room - 3, "...", 3);
    note[length] = '\0';
}

}  // namespace

LogFields WorkerProcess::log_fields(std::string event) const {
    LogFields fields;
    fields.pack = pack.name;
    fields.slot = slot;
    fields.generation = generation;
    fields.event = std::move(event);
    return fields;
}

ParticipantRecord WorkerProcess::record() const {
    ParticipantRecord record{};
    std::strncpy(record.name, pack.name.c_str(), sizeof record.name - 1);
    record.pid = process.pid > 0 ? process.pid : 0;
    record.generation = generation;
    record.state = static_cast<std::uint8_t>(state);
    record.kind = static_cast<std::uint8_t>(kind);
    const bool busy = state == ParticipantState::busy;
    record.flags = static_cast<std::uint16_t>((deaf ? kParticipantDeaf : 0) |
                                              (busy && in_callback ? kParticipantInCallback : 0));
    record.restarts = restarts.restarts();
    record.last_exit_status = last_exit_status;
    record.last_exit_signal = last_exit_signal;
    record.started_at_ms = started_at_ms;
    std::strncpy(record.last_node, last_node.c_str(), sizeof record.last_node - 1);
    record.busy_since_ms = busy ? busy_since_ms : 0;
    record.node_classes = node_classes;
    copy_note(note, record.note);
    return record;
}

Message WorkerProcess::failure(FailureReason reason, std::uint64_t correlation) const {
    return request_failed({static_cast<std::uint32_t>(reason), last_exit_status, last_exit_signal, slot}, generation,
                          correlation);
}

void WorkerProcess::fail_requests(FailureReason reason, bool include_queued) {
    auto sent = std::move(in_flight);
    in_flight.clear();
    for (auto& [correlation, request] : sent) request.reply(failure(reason, correlation));
    if (!include_queued) return;
    auto waiting = std::move(queued);
    queued.clear();
    for (auto& request : waiting) request.reply(failure(reason, request.message.header.correlation));
}

Message request_failed(const RequestFailed& payload, std::uint32_t generation, std::uint64_t correlation) {
    Message message{};
    message.header.type = static_cast<std::uint16_t>(MessageType::request_failed);
    message.header.version = kMessageVersion;
    message.header.payload_size = sizeof(RequestFailed);
    message.header.generation = generation;
    message.header.correlation = correlation;
    message.payload = payload;
    return message;
}

std::map<std::string, std::string> child_environment(const PackConfig& pack, const worker::WorkerEnvironment& attach) {
    std::map<std::string, std::string> env = configured_environment(pack);
    for (const auto& [key, value] : attach.to_variables()) env[key] = value;
    // The library of this build or install, so that a Python participant loads the one that
    // speaks this supervisor's layout.
    static const std::string library = participant_library();
    if (!library.empty()) env[worker::kEnvLibrary] = library;
    return env;
}

std::string describe_exit(int status, int signal) {
    if (signal != 0) return std::string("killed by SIG") + (sigabbrev_np(signal) ? sigabbrev_np(signal) : "?");
    return "exited with status " + std::to_string(status);
}

}  // namespace comfy::supervisor
