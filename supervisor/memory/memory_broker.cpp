#include "supervisor/memory/memory_broker.hpp"

#include "shared/byte_size.hpp"
#include "supervisor/ops/log/log.hpp"

#include <algorithm>
#include <cstdio>

namespace comfy::supervisor {

using Clock = std::chrono::steady_clock;

MemoryBroker::MemoryBroker(const Config& config, WorkerAccess& workers, CensusReader& census, SegmentWriter& writes,
                           EventJournal& journal)
    : workers_(workers),
      census_(census),
      writes_(writes),
      journal_(journal),
      outstanding_limit_(config.limits.outstanding_requests),
      ledger_entries_(config.limits.capacities.ledger_entries),
      ledger_quota_(ledger_quota_of(config)),
      deaf_policy_(config.memory.deaf_participant),
      arbiter_(arbiter::ArbiterConfig{config.memory.reserve_bytes, config.memory.no_fit,
                                      static_cast<std::uint64_t>(config.memory.wait_timeout.count()),
                                      static_cast<std::uint64_t>(config.memory.answer_timeout.count()),
                                      VramState::normal_vram, config.memory.smart_memory},
               config.limits.capacities.ledger_entries) {}

void MemoryBroker::handle(WorkerProcess& worker, const Message& message) {
    const arbiter::Participant who{worker.slot, worker.generation};
    switch (message.type()) {
        case MessageType::model_registered: {
            const auto& report = std::get<ModelRegistered>(message.payload);
            if (!arbiter_.ledger().within_quota(who.slot, who.generation, report.model_id, ledger_quota_)) {
                LogFields about = worker.log_fields();
                about.model = name_in(report.name);
                about.model_id = report.model_id;
                workers_.log_about(worker, "ledger reports",
                                   worker.pack.name + ": " + arbiter::model_text(report.model_id, about.model) +
                                       " is not tracked: the pack has " + std::to_string(ledger_quota_) +
                                       " models in the ledger, its quota (memory.ledger_quota); raise it, or "
                                       "limits.ledger_entries, if the pack really holds more",
                                   about);
                break;
            }
            arbitrate(arbiter::event::Registered{who, report});
            break;
        }
        case MessageType::residency_receipt:
            arbitrate(arbiter::event::Residency{who, std::get<ResidencyReceipt>(message.payload)});
            break;
        case MessageType::model_dropped:
            arbitrate(arbiter::event::Dropped{who, std::get<ModelDropped>(message.payload).model_id});
            break;
        case MessageType::admission_keep: {
            const auto error = worker.keeping.add(message.header.correlation, std::get<AdmissionKeep>(message.payload));
            if (!error.empty()) workers_.terminate(worker, error);
            break;
        }
        case MessageType::admission_request: {
            const auto& request = std::get<AdmissionRequest>(message.payload);
            std::string error;
            auto keep = worker.keeping.take(message.header.correlation, request.keep_loaded_count, error);
            if (!error.empty()) {
                workers_.terminate(worker, error);
                break;
            }
            if (!may_ask(worker, message.type())) break;
            ++totals_.admissions;
            admission_waits_.asked(worker.slot, message.header.correlation, request.bytes, Clock::now());
            note_fit_by_release(worker, request);
            arbitrate(arbiter::event::Admission{who, message.header.correlation, request, std::move(keep)});
            break;
        }
        case MessageType::unload_receipt: {
            const auto& receipt = std::get<UnloadReceipt>(message.payload);
            if (!worker.answers_due.settle_eviction(receipt.model_id, receipt.deferred != 0)) {
                refuse_unasked(worker, "an unload receipt for model " + std::to_string(receipt.model_id));
                break;
            }
            const Bytes freed = releases_.bounded(receipt.bytes_freed, eviction_bound(who, receipt.model_id));
            totals_.bytes_evicted = saturating_add(totals_.bytes_evicted, freed);
            const std::string model = model_name(who, receipt.model_id);
            journal_.record("eviction", worker.pack.name,
                            "freed " + format_byte_size(freed) + " of " + arbiter::model_text(receipt.model_id, model) +
                                " (asked " + format_byte_size(receipt.bytes_requested) + ")",
                            {{"model_id", receipt.model_id},
                             {"model", model},
                             {"bytes_requested", receipt.bytes_requested},
                             {"bytes_freed", freed},
                             {"deferred", receipt.deferred != 0}});
            arbitrate(arbiter::event::Unloaded{who, receipt});
            break;
        }
        case MessageType::release_receipt: on_release_receipt(worker, std::get<ReleaseReceipt>(message.payload)); break;
        case MessageType::standin_unload:
            // Stand-ins live in the ComfyUI host's list alone: a worker asking to unload
            // another pack's model is not one of ours.
            if (worker.kind != ParticipantKind::host) {
                workers_.terminate(worker, "sent a standin_unload, which only the ComfyUI host sends");
                break;
            }
            if (!may_ask(worker, message.type())) break;
            arbitrate(arbiter::event::StandIn{who, message.header.correlation,
                                              std::get<StandInUnload>(message.payload)});
            break;
        default:
            // A supervisor-to-participant type sent back to us: a confused or hostile worker.
            workers_.terminate(worker, std::string("sent a ") + std::string(to_string(message.type())) +
                                  ", which only the supervisor sends");
            break;
    }
}

void MemoryBroker::on_release_receipt(WorkerProcess& worker, const ReleaseReceipt& receipt) {
    const auto type = static_cast<MessageType>(receipt.release_type);
    const auto asked = worker.answers_due.settle_release(type, receipt.deferred != 0);
    if (!asked) {
        refuse_unasked(worker, "a release receipt (" + std::string(to_string(type)) + ")");
        return;
    }
    // Pins are host memory: no more than were asked; the rest is device memory.
    const Bytes bound = type == MessageType::release_pins ? *asked : census_.snapshot(now_ms()).device_total;
    const auto recorded = releases_.record(worker.slot, receipt, bound);
    if (recorded && recorded->freed > 0) {
        const std::string line =
            std::string(to_string(recorded->kind)) + " release freed " + format_byte_size(recorded->freed);
        journal_.record("release", worker.pack.name, line,
                        {{"release", to_string(recorded->kind)}, {"bytes_freed", recorded->freed}});
        workers_.log_about(worker, "releases", worker.pack.name + ": " + line);
    }
    arbitrate(arbiter::event::Released{{worker.slot, worker.generation}, receipt});
}

void MemoryBroker::refuse_unasked(WorkerProcess& worker, const std::string& what) {
    releases_.refuse_unasked();
    workers_.log_about(worker, "receipts",
                       worker.pack.name + ": " + what + " answered nothing asked of it; not counted");
}

std::string MemoryBroker::model_name(const arbiter::Participant& who, std::uint64_t model_id) const {
    const auto row = arbiter_.ledger().find(who.slot, who.generation, model_id);
    return row ? arbiter_.ledger().at(*row)->name : std::string();
}

LogFields MemoryBroker::note_fields(const arbiter::action::NoteSubject& subject) {
    LogFields fields;
    if (subject.names_participant()) {
        fields.slot = subject.who.slot;
        fields.generation = subject.who.generation;
        for (const auto& worker : workers_.workers()) {
            if (worker->slot == subject.who.slot) fields.pack = worker->pack.name;
        }
    }
    if (subject.model_id != 0) fields.model_id = subject.model_id;
    fields.model = subject.model;
    return fields;
}

Bytes MemoryBroker::eviction_bound(const arbiter::Participant& who, std::uint64_t model_id) {
    // No more than the model's size, while the ledger has it, nor than the device holds.
    const Bytes device = census_.snapshot(now_ms()).device_total;
    const auto row = arbiter_.ledger().find(who.slot, who.generation, model_id);
    return row ? std::min(device, arbiter_.ledger().at(*row)->total_bytes) : device;
}

void MemoryBroker::note_fit_by_release(const WorkerProcess& worker, const AdmissionRequest& request) {
    const Bytes freed = releases_.take_boundary_freed(worker.slot);
    if (freed == 0) return;
    const Bytes free = arbiter::free_reported_to(census_.snapshot(now_ms()), worker.slot);
    const double target =
        admission_target(request.bytes, request.largest_tensor, request.streams, arbiter_.config().base_reserve);
    if (const auto line = fit_by_boundary_release(worker.pack.name, request.bytes, target, free, freed)) {
        workers_.log_about(worker, "admissions", *line);
    }
}

void MemoryBroker::detach_every_model(const std::string& why) {
    const auto& ledger = arbiter_.ledger();
    log_line("operator asked to unload every model (" + why + "): detaching " + std::to_string(ledger.size()) +
             " model(s)");
    journal_.record("operator", "", "unload every model (" + std::to_string(ledger.size()) + ")");
    // As unload_all_models walks current_loaded_models: each owner detaches its own (a busy
    // one at its next boundary). Delivering changes no row: the receipts come later.
    for (std::size_t row = 0; row < ledger.capacity(); ++row) {
        const auto& entry = ledger.at(row);
        if (!entry) continue;
        if (WorkerProcess* owner = workers_.live(entry->owner_slot, entry->owner_generation)) {
            workers_.deliver(*owner, encode(Detach{entry->model_id}, owner->generation));
        }
    }
}

void MemoryBroker::forget(std::uint32_t slot) {
    releases_.forget(slot);
    admission_waits_.forget(slot);
}

std::uint64_t MemoryBroker::now_ms() const {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_at_).count());
}

void MemoryBroker::arbitrate(const arbiter::Event& event) {
    // A reference into the reader: nothing below refreshes it before the arbiter is done.
    const auto& snap = census_.snapshot(now_ms());
    // Every allocation is followed by a report, and every tick arbitrates: the peak is
    // sampled here from the reading the arbiter uses anyway.
    totals_.peak_device_used =
        std::max(totals_.peak_device_used, snap.device_total - std::min(snap.device_free, snap.device_total));
    const auto actions = arbiter_.handle(event, snap);
    if (recorder_) recorder_->record(event, snap, actions);
    const auto source = note_source(event);
    for (const auto& action : actions) carry_out(action, source);
    publish_ledger();
    if (observer_) observer_(event, actions);
}

void MemoryBroker::record_to(const std::string& path) {
    recorder_.emplace(path, arbiter_.config(), ledger_entries_);
}

std::optional<MemoryBroker::NoteSource> MemoryBroker::note_source(const arbiter::Event& event) {
    // A participant can send these again and again. Joins and deaths come once a life and
    // ticks with the clock; node boundaries decide nothing worth a note: logged whole.
    return std::visit(
        [](const auto& e) -> std::optional<NoteSource> {
            using E = std::decay_t<decltype(e)>;
            if constexpr (std::is_same_v<E, arbiter::event::Registered> || std::is_same_v<E, arbiter::event::Residency> ||
                          std::is_same_v<E, arbiter::event::Dropped>) {
                return NoteSource{e.who, "ledger reports"};
            } else if constexpr (std::is_same_v<E, arbiter::event::Admission>) {
                return NoteSource{e.who, "admissions"};
            } else if constexpr (std::is_same_v<E, arbiter::event::Unloaded>) {
                return NoteSource{e.who, "eviction answers"};
            } else if constexpr (std::is_same_v<E, arbiter::event::Released>) {
                return NoteSource{e.who, "releases"};
            } else if constexpr (std::is_same_v<E, arbiter::event::StandIn>) {
                return NoteSource{e.who, "stand-in unloads"};
            } else {
                return std::nullopt;
            }
        },
        event);
}

void MemoryBroker::carry_out(const arbiter::Action& action, const std::optional<NoteSource>& source) {
    std::visit(
        [&](const auto& a) {
            using A = std::decay_t<decltype(a)>;
            if constexpr (std::is_same_v<A, arbiter::action::Note>) {
                const WorkerProcess* about = source ? workers_.live(source->who.slot, source->who.generation) : nullptr;
                LogFields fields = note_fields(a.subject);
                if (about != nullptr) {
                    workers_.log_about(*about, source->topic, "memory: " + a.text, std::move(fields));
                } else {
                    fields.event = "memory";
                    log_line(LogLevel::info, "memory: " + a.text, fields);
                }
            } else if constexpr (std::is_same_v<A, arbiter::action::Deafness>) {
                on_deafness(a);
            } else {
                WorkerProcess* target = workers_.live(a.to.slot, a.to.generation);
                if (target == nullptr) return;  // gone since: the arbiter hears of it through Left
                if constexpr (std::is_same_v<A, arbiter::action::SendPartialUnload> ||
                              std::is_same_v<A, arbiter::action::SendDetach>) {
                    ++totals_.evictions_asked;
                    workers_.deliver(*target, encode(a.command, target->generation));
                } else if constexpr (std::is_same_v<A, arbiter::action::SendPartialRelease>) {
                    workers_.deliver(*target, encode(a.command, target->generation));
                } else if constexpr (std::is_same_v<A, arbiter::action::AnswerStandIn>) {
                    workers_.deliver(*target, encode(a.result, target->generation, a.correlation));
                } else if constexpr (std::is_same_v<A, arbiter::action::Grant>) {
                    ++totals_.granted;
                    if (a.grant.shortfall > 0) ++totals_.admitted_short;
                    record_answer(*target, a.correlation, true, a.grant.device_free, a.grant.shortfall);
                    workers_.deliver(*target, encode(a.grant, target->generation, a.correlation));
                } else {
                    ++totals_.refused;
                    record_answer(*target, a.correlation, false, a.refusal.device_free, 0);
                    workers_.deliver(*target, encode(a.refusal, target->generation, a.correlation));
                }
            }
        },
        action);
}

void MemoryBroker::on_deafness(const arbiter::action::Deafness& d) {
    WorkerProcess* worker = workers_.live(d.who.slot, d.who.generation);
    if (worker == nullptr) return;  // gone since: its next life starts hearing
    worker->deaf = d.deaf;
    writes_.participant(worker->slot, worker->record());
    if (!d.deaf) {
        workers_.happened(LogLevel::info, *worker, "heard",
                          "answers the supervisor again: its models are candidates for eviction again",
                          {{"deaf", false}});
        return;
    }
    ++totals_.deaf_marked;
    const auto held = arbiter_.ledger().held_by(worker->slot);
    const bool restart = deaf_policy_ == DeafPolicy::restart;
    const std::string models = std::to_string(held.models) + " model(s) (" + format_byte_size(held.loaded) + " loaded)";
    const std::string what = "deaf: it let a command go unanswered for " +
                             std::to_string(arbiter_.config().answer_timeout_ms) + " ms (memory.answer_timeout_ms); ";
    workers_.happened(
        LogLevel::warning, *worker, "deaf",
        what + (restart ? "restarting it so that its " + models + " come back (memory.deaf_participant \"restart\")"
                        : "its " + models + " are passed over until it answers (memory.deaf_participant \"keep\"); "
                          "comfyctl restart " + worker->pack.name + " gets their memory back"),
        {{"deaf", true}, {"models", held.models}, {"loaded_bytes", held.loaded}, {"restart", restart}});
    if (restart) workers_.terminate(*worker, "deaf (memory.deaf_participant \"restart\")");
}

void MemoryBroker::record_answer(const WorkerProcess& asker, std::uint64_t correlation, bool granted,
                                 Bytes device_free, Bytes shortfall) {
    const char* answer = granted ? "granted" : "refused";
    const auto waited = admission_waits_.answered(asker.slot, correlation, Clock::now());
    if (!waited) return;
    // Milliseconds below a second: most grants come from free memory in microseconds.
    char wait[32];
    if (waited->waited_seconds < 1) {
        std::snprintf(wait, sizeof wait, "%.2f ms", waited->waited_seconds * 1000);
    } else {
        std::snprintf(wait, sizeof wait, "%.2f s", waited->waited_seconds);
    }
    journal_.record("admission", asker.pack.name,
                    std::string(answer) + " " + format_byte_size(waited->asked) + " after " + wait + " (" +
                        format_byte_size(device_free) + " free" +
                        (shortfall > 0 ? ", " + format_byte_size(shortfall) + " short" : std::string()) + ")",
                    {{"answer", answer},
                     {"bytes", waited->asked},
                     {"waited_seconds", waited->waited_seconds},
                     {"device_free", device_free},
                     {"shortfall", shortfall}},
                    granted ? LogLevel::info : LogLevel::warning);
}

bool MemoryBroker::may_ask(WorkerProcess& worker, MessageType sent) {
    // Admissions not answered yet, and answers it has not taken from its ring: a well-behaved
    // participant waits for each answer before it asks again.
    const std::size_t outstanding = arbiter_.unanswered(worker.slot) + worker.outbox.answers();
    if (outstanding < outstanding_limit_) return true;
    workers_.terminate(worker, "sent " + std::string(to_string(sent)) + " with " + std::to_string(outstanding) +
                          " requests outstanding, past limits.outstanding_requests (" +
                          std::to_string(outstanding_limit_) +
                          "); a participant waits for its answers before it asks again");
    return false;
}

void MemoryBroker::publish_ledger() {
    const auto changed = arbiter_.ledger().take_changed();
    if (changed.empty()) return;  // the generation stays: idle readers skip their read
    for (const auto index : changed) {
        const auto& entry = arbiter_.ledger().at(index);
        writes_.ledger(static_cast<std::uint32_t>(index), entry ? to_record(*entry) : LedgerRecord{});
    }
    writes_.ledger_changed();
}

}  // namespace comfy::supervisor
