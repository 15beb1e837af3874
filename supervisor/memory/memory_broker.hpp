#pragma once
// Room memory/: memory for the whole machine. The broker between the participants and the
// arbiter, the release paths, the census read and judged, host RAM, and the segment's writer.
//
// Memory arbitration on the supervisor's loop: each memory report and request a
// participant sends becomes an arbiter event with a fresh census snapshot; what the
// arbiter decides is carried out (evictions, grants, refusals, stand-in answers) and the
// ledger's changes are published to the segment. It keeps what an operator sees of it:
// the totals, the release receipts by kind, how long admissions waited, and the journal's
// admission, eviction and release events. A participant the arbiter finds deaf is marked
// in its record, told to the operator, and kept or restarted as memory.deaf_participant says.

#include "supervisor/arbiter/arbiter.hpp"
#include "supervisor/arbiter/trace.hpp"
#include "supervisor/config/config.hpp"
#include "supervisor/lifecycle/worker_access.hpp"
#include "supervisor/memory/admission_waits.hpp"
#include "supervisor/memory/census_reader.hpp"
#include "supervisor/memory/release_totals.hpp"
#include "supervisor/memory/segment_writer.hpp"
#include "supervisor/ops/log/event_journal.hpp"

#include <chrono>
#include <functional>
#include <optional>
#include <vector>

namespace comfy::supervisor {

struct MemoryTotals {
    std::uint64_t peak_device_used = 0;
    std::uint32_t admissions = 0;
    std::uint32_t evictions_asked = 0;  // partial unloads and detaches sent to owners
    std::uint64_t bytes_evicted = 0;    // measured, from the owners' receipts (bounded, saturating)
    std::uint32_t granted = 0;          // shortfall or not
    std::uint32_t admitted_short = 0;   // granted with a shortfall (policy admit)
    std::uint32_t refused = 0;
    std::uint32_t deaf_marked = 0;      // participants found deaf: one answer time-out each
};

class MemoryBroker {
public:
    MemoryBroker(const Config& config, WorkerAccess& workers, CensusReader& census, SegmentWriter& writes,
                 EventJournal& journal);

    // A memory message from `worker` (registered, residency, dropped, keep, admission,
    // unload and release receipts, pin requests go elsewhere): anything not one of these
    // stops the worker.
    void handle(WorkerProcess& worker, const Message& message);
    // Feeds the arbiter `event` with a fresh snapshot, carries out what it decides, and
    // publishes the ledger's changes.
    void arbitrate(const arbiter::Event& event);
    // Whether `worker`, which just sent a message of type `sent`, may have one more
    // request waiting on us; if not, it is stopped.
    bool may_ask(WorkerProcess& worker, MessageType sent);
    // Asks the owner of every model in the ledger to detach it, as ComfyUI's
    // unload_all_models does (`why` names who asked, for the log and the journal).
    void detach_every_model(const std::string& why);
    // A life in `slot` ended: what it asked and what it freed no longer count as pending.
    void forget(std::uint32_t slot);

    // Writes every event the arbiter sees to `path` (docs/TRACE.md). Throws on an
    // unwritable file.
    void record_to(const std::string& path);
    using Observer = std::function<void(const arbiter::Event&, const std::vector<arbiter::Action>&)>;
    void observe(Observer observer) { observer_ = std::move(observer); }

    // Milliseconds since the supervisor started: the arbiter's clock.
    std::uint64_t now_ms() const;
    const arbiter::Arbiter& arbiter() const noexcept { return arbiter_; }
    const MemoryTotals& totals() const noexcept { return totals_; }
    const ReleaseCounts& released() const noexcept { return releases_.counts(); }
    const RefusedReceipts& receipts_refused() const noexcept { return releases_.refused(); }
    const AdmissionWaits::Histogram& admission_waits() const noexcept { return admission_waits_.histogram(); }

private:
    // Who an event's notes are about, when it is a participant's message: its notes are
    // logged through the limiter under `topic`.
    struct NoteSource {
        arbiter::Participant who;
        const char* topic;
    };
    static std::optional<NoteSource> note_source(const arbiter::Event& event);
    void carry_out(const arbiter::Action& action, const std::optional<NoteSource>& source);
    // What a note is about, for the journal's fields: its subject's pack, slot and life,
    // and the model it names.
    LogFields note_fields(const arbiter::action::NoteSubject& subject);
    // The name `who` reported for `model_id`, while the ledger has it.
    std::string model_name(const arbiter::Participant& who, std::uint64_t model_id) const;
    void on_release_receipt(WorkerProcess& worker, const ReleaseReceipt& receipt);
    // The arbiter found `d.who` deaf, or hears it again.
    void on_deafness(const arbiter::action::Deafness& d);
    // A receipt (`what`) that answers nothing asked of `worker`: counted as refused, logged.
    void refuse_unasked(WorkerProcess& worker, const std::string& what);
    // The most an unload receipt of `who` for `model_id` can count.
    Bytes eviction_bound(const arbiter::Participant& who, std::uint64_t model_id);
    // Logs a load that fits only because its worker's boundary releases ran before it.
    void note_fit_by_release(const WorkerProcess& worker, const AdmissionRequest& request);
    // Journals an admission's answer with what it asked and how long it waited; a refusal,
    // which fails the asker's load, at warning, kept with the failures.
    void record_answer(const WorkerProcess& asker, std::uint64_t correlation, bool granted, Bytes device_free,
                       Bytes shortfall);
    void publish_ledger();

    WorkerAccess& workers_;
    CensusReader& census_;
    SegmentWriter& writes_;
    EventJournal& journal_;
    std::size_t outstanding_limit_;  // limits.outstanding_requests
    std::uint32_t ledger_entries_;   // limits.capacities.ledger_entries, for a trace
    std::uint32_t ledger_quota_;     // rows one participant may hold in the ledger
    DeafPolicy deaf_policy_;         // memory.deaf_participant
    arbiter::Arbiter arbiter_;
    std::optional<arbiter::TraceRecorder> recorder_;
    Observer observer_;
    MemoryTotals totals_;
    ReleaseTotals releases_;
    AdmissionWaits admission_waits_;
    std::chrono::steady_clock::time_point started_at_ = std::chrono::steady_clock::now();
};

}  // namespace comfy::supervisor
