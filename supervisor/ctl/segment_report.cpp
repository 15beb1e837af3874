#include "supervisor/ctl/segment_report.hpp"

#include "shared/message_payloads.hpp"

#include <algorithm>

#include "shared/device_accounting.hpp"

#include <array>
#include <atomic>
#include <thread>

namespace comfy::ctl {

namespace {

constexpr std::array<const char*, kParticipantStateCount> kStateNames = {"empty", "spawning", "ready", "busy",
                                                                          "draining", "dead", "failed", "stopped"};

// A seqlock read retried in a few bounded rounds with short pauses, so a writer that was
// preempted mid-write gets a moment to finish; a writer that died mid-write costs a few
// milliseconds and yields "busy".
template <class T>
ipc::SeqlockRead read_bounded(const ipc::Seqlock<T>& lock, T& out, const ReadPolicy& policy) {
    for (int round = 0; round < policy.rounds; ++round) {
        if (round > 0) std::this_thread::sleep_for(policy.pause_between_rounds);
        if (lock.read(out, policy.tries_per_round) == ipc::SeqlockRead::ok) return ipc::SeqlockRead::ok;
    }
    return ipc::SeqlockRead::busy;
}

// The supervisor's judgement, checked again against the participant record read here.
RecordStatus census_status(const CensusReport& reported, std::uint32_t generation) {
    switch (static_cast<CensusStatus>(reported.status)) {
        case CensusStatus::ok:
            return reported.census.generation == generation ? RecordStatus::ok : RecordStatus::stale;
        case CensusStatus::stale: return RecordStatus::stale;
        case CensusStatus::unread: return RecordStatus::unread;
        case CensusStatus::unreadable: return RecordStatus::unreadable;
    }
    return RecordStatus::unreadable;  // a status no supervisor writes
}

}  // namespace

const char* status_name(RecordStatus status) noexcept {
    switch (status) {
        case RecordStatus::ok: return "ok";
        case RecordStatus::stale: return "stale";
        case RecordStatus::busy: return "busy";
        case RecordStatus::unread: return "unread";
        case RecordStatus::unreadable: return "unreadable";
    }
    return "busy";
}

bool figures_known(RecordStatus status) noexcept { return status == RecordStatus::ok || status == RecordStatus::stale; }

std::string state_name(std::uint8_t state) {
    if (state < kStateNames.size()) return kStateNames[state];
    return "invalid(" + std::to_string(state) + ")";
}

std::string kind_name(std::uint8_t kind) {
    if (kind == static_cast<std::uint8_t>(ParticipantKind::worker)) return "worker";
    if (kind == static_cast<std::uint8_t>(ParticipantKind::host)) return "host";
    return "invalid(" + std::to_string(kind) + ")";
}

std::string display_name(std::span<const char> raw, bool& valid) {
    valid = true;
    std::size_t length = 0;
    while (length < raw.size() && raw[length] != '\0') ++length;
    const bool terminated = length < raw.size();
    if (!terminated) length = raw.size() - 1;  // room for the '?' that marks the cut
    std::string name;
    name.reserve(length + 1);
    for (std::size_t i = 0; i < length; ++i) {
        const auto byte = static_cast<unsigned char>(raw[i]);
        // Printable ASCII only: the name goes to a terminal and into JSON (which needs UTF-8).
        if (byte < 0x20 || byte > 0x7e) {
            name += '?';
            valid = false;
        } else {
            name += static_cast<char>(byte);
        }
    }
    if (!terminated) {
        name += '?';
        valid = false;
    }
    return name;
}

bool slot_in_use(const ParticipantRecord& record) noexcept {
    return record.generation != 0 || record.state != static_cast<std::uint8_t>(ParticipantState::empty);
}

WorkerRow worker_row(std::uint32_t slot, const ParticipantRecord& record) {
    WorkerRow row;
    row.slot = slot;
    row.name = display_name(record.name, row.name_valid);
    row.kind = kind_name(record.kind);
    row.state = state_name(record.state);
    row.deaf = (record.flags & kParticipantDeaf) != 0;  // the other bits are a later reader's
    row.live = is_live_participant_state(record.state);
    row.pid = record.pid;
    row.generation = record.generation;
    row.restarts = record.restarts;
    row.last_exit_status = record.last_exit_status;
    row.last_exit_signal = record.last_exit_signal;
    row.started_at_ms = record.started_at_ms;
    bool node_valid = true;
    row.last_node = display_name(record.last_node, node_valid);
    // Said of a busy participant only: another state's are a stale writer's, not shown.
    const bool busy = record.state == static_cast<std::uint8_t>(ParticipantState::busy);
    row.in_callback = busy && (record.flags & kParticipantInCallback) != 0;
    row.busy_since_ms = busy ? record.busy_since_ms : 0;
    if (record.node_classes != kNodeClassesUncounted) row.node_classes = record.node_classes;
    bool note_valid = true;  // the supervisor writes it printable; a byte that is not is shown as '?'
    row.note = display_name(record.note, note_valid);
    return row;
}

namespace {

void read_ledger(const SegmentView& view, const ReadPolicy& policy, SegmentReport& report) {
    for (std::uint32_t index = 0; index < view.capacities().ledger_entries; ++index) {
        LedgerRecord record{};
        LedgerRow row;
        row.row = index;
        if (read_bounded(view.ledger(index).entry, record, policy) == ipc::SeqlockRead::busy) {
            row.busy = true;
            report.ledger.push_back(row);
            continue;
        }
        if (record.owner_generation == 0) continue;  // a free row
        row.owner_slot = record.owner_slot;
        row.owner_generation = record.owner_generation;
        row.model_id = record.model_id;
        bool name_valid = true;  // is_valid_ledger_record judges the name with the rest of the row
        row.name = display_name(record.name, name_valid);
        row.device = record.device;
        row.total_bytes = record.total_bytes;
        if (record.loaded_bytes != kUnknownBytes) row.loaded_bytes = record.loaded_bytes;
        row.references = record.references;
        row.currently_used = record.currently_used != 0;
        row.dynamic = record.dynamic != 0;
        row.load_order = record.load_order;
        row.valid = is_valid_ledger_record(record, view.capacities().participants);
        for (const auto& worker : report.workers) {
            if (!worker.busy && worker.slot == record.owner_slot && worker.generation == record.owner_generation) {
                row.owner = worker.name;
            }
        }
        report.ledger.push_back(row);
    }
    std::stable_sort(report.ledger.begin(), report.ledger.end(),
                     [](const LedgerRow& a, const LedgerRow& b) { return a.load_order > b.load_order; });
}

}  // namespace

SegmentReport read_report(const std::string& instance, const ipc::SharedSegment& segment, const ReadPolicy& policy) {
    const SegmentView view = view_of(segment);
    SegmentReport report;
    report.instance = instance;
    report.segment = segment.name();
    report.supervisor_pid = segment.header().creator_pid;
    report.participant_slots = view.capacities().participants;
    report.device.total_bytes = view.device_total_bytes();
    // The accounting rule the workers allocate by, over the records as read here; a slot
    // that stays busy is shown as such and adds nothing.
    DeviceUseTally device_use;

    for (std::uint32_t slot = 0; slot < report.participant_slots; ++slot) {
        ParticipantRecord record{};
        const bool busy = read_bounded(view.participant(slot).record, record, policy) == ipc::SeqlockRead::busy;
        if (!busy && !slot_in_use(record)) continue;

        CensusRow census;
        census.slot = slot;
        CensusReport reported{};
        const bool census_busy = read_bounded(view.participant(slot).census, reported, policy) == ipc::SeqlockRead::busy;
        if (!census_busy) census.heartbeat = reported.heartbeat;

        if (busy) {
            WorkerRow row;
            row.slot = slot;
            row.busy = true;
            report.workers.push_back(std::move(row));
            census.participant_busy = true;
            report.census.push_back(census);  // busy: the generation to compare with is unknown
            continue;
        }

        WorkerRow row = worker_row(slot, record);
        census.name = row.name;
        census.generation = row.generation;
        if (!census_busy) census.status = census_status(reported, row.generation);
        if (figures_known(census.status)) {
            census.census = reported.census;
            device_use.add(record, reported.census.generation, reported.census.device_used_bytes);
        }
        report.workers.push_back(std::move(row));
        report.census.push_back(census);
    }

    read_ledger(view, policy, report);
    report.device.used_bytes = device_use.counted_bytes();
    if (report.device.total_bytes != 0) {
        const auto total = report.device.total_bytes;
        const auto used = report.device.used_bytes;
        report.device.free_bytes = used >= total ? 0 : total - used;
    }
    return report;
}

}  // namespace comfy::ctl
