#include "supervisor/arbiter/arbiter.hpp"

#include "shared/byte_size.hpp"

#include <algorithm>
#include <utility>

namespace comfy::arbiter {

namespace {
// "impact (slot 2, generation 1)", or "slot 2 (generation 1)" without a name.
std::string described(const Participant& p, const std::string& name) {
    const std::string slot = "slot " + std::to_string(p.slot);
    const std::string generation = "generation " + std::to_string(p.generation);
    return name.empty() ? slot + " (" + generation + ")" : name + " (" + slot + ", " + generation + ")";
}
std::string model_of(const action::NoteSubject& subject) { return model_text(subject.model_id, subject.model); }
// A note about a participant, naming no model.
action::NoteSubject about(const Participant& p) { return {p, 0, {}}; }
std::string bytes(Bytes b) { return format_byte_size(b); }
std::string bytes(double b) { return format_byte_size(whole_bytes_up(b)); }
// Upstream's test: memory is short while target - free > 0, in double.
bool fits(double target, Bytes free) { return !(memory_to_free(target, free) > 0); }
// Matches the outstanding eviction commands of the owner in `slot`.
auto of_owner(std::uint32_t slot) {
    return [slot](const auto& awaiting) { return awaiting.owner.slot == slot; };
}
}  // namespace

Arbiter::Arbiter(ArbiterConfig config, std::uint32_t ledger_capacity) : config_(config), ledger_(ledger_capacity) {}

std::vector<Action> Arbiter::handle(const Event& event, const Snapshot& snapshot) {
    std::vector<Action> actions;
    snapshot_ = &snapshot;
    out_ = &actions;
    std::visit([this](const auto& e) { on(e); }, event);
    snapshot_ = nullptr;
    out_ = nullptr;
    return actions;
}

std::size_t Arbiter::unanswered() const noexcept {
    return queue_.size() + waiting_.size() + (working_ ? 1 : 0) + standins_.size();
}

std::size_t Arbiter::unanswered(std::uint32_t slot) const {
    const auto found = unanswered_by_slot_.find(slot);
    return (found == unanswered_by_slot_.end() ? 0 : found->second) + standins_.unanswered(slot);
}

// ---- events ----

void Arbiter::on(const event::Joined& e) { participants_[e.who.slot] = {e.who.generation, false, e.name}; }

void Arbiter::on(const event::Left& e) {
    const auto found = participants_.find(e.who.slot);
    if (found == participants_.end() || found->second.generation != e.who.generation) return;
    const std::string name = std::move(found->second.name);  // for the notes below
    participants_.erase(found);
    ledger_.erase_owner(e.who.slot);
    deaf_.forget(e.who.slot);
    granted_not_loaded_.erase(e.who.slot);
    published_reserve_.erase(e.who.slot);
    receipt_since_publish_ = true;
    // Nobody is left to answer: forget the dead asker's requests.
    const auto from_dead = [&](const Request& r) { return r.asker.slot == e.who.slot; };
    withdrawn_ += std::erase_if(queue_, from_dead) + std::erase_if(waiting_, from_dead);
    unanswered_by_slot_.erase(e.who.slot);
    withdrawn_ += standins_.drop_asker(e.who.slot);
    // Its memory went with the process: a stand-in of its models reports itself freed.
    answer_standins(standins_.take_for_owner(e.who.slot), StandInOutcome::owner_gone, 0, 0);
    if (working_) working_->timed_out.erase(e.who.slot);  // a next life is asked as any
    if (working_ && from_dead(working_->request)) {
        ++withdrawn_;
        working_.reset();
        pump();
        return;
    }
    if (working_ && working_->releasing.count(e.who.slot)) {
        sibling_answered(e.who.slot);
        return;
    }
    if (working_ && std::erase_if(working_->awaiting, of_owner(e.who.slot))) {
        // Its memory went with the process: the eviction succeeded.
        note("owner " + described(e.who, name) + " died during its eviction; its entries count as freed", about(e.who));
        advance();
        return;
    }
    recheck_waiting();
}

void Arbiter::on(const event::Busy& e) {
    if (!current(e.who)) return;
    participants_[e.who.slot].busy = e.busy;
    // At a node's end its loads are reported (they travel ahead of node_finished): a grant
    // it did not use is no longer promised.
    if (!e.busy && granted_not_loaded_.erase(e.who.slot) > 0) receipt_since_publish_ = true;
}

void Arbiter::loaded_more(std::uint32_t slot, Bytes bytes) {
    const auto found = granted_not_loaded_.find(slot);
    if (found == granted_not_loaded_.end()) return;
    found->second -= std::min(found->second, bytes);
}

void Arbiter::on(const event::Registered& e) {
    if (!current(e.who)) return;
    const auto index = ledger_.apply_registered(e.who.slot, e.who.generation, e.report);
    if (!index) {
        const action::NoteSubject subject{e.who, e.report.model_id, std::string(name_in(e.report.name))};
        note("ledger full: " + model_of(subject) + " of " + who(e.who) + " is not tracked", subject);
        return;
    }
    // An unknown figure is read as fully loaded, as everywhere in the ledger.
    loaded_more(e.who.slot, ledger_.at(*index)->loaded_or_total());
    receipt_since_publish_ = true;
}

void Arbiter::on(const event::Residency& e) {
    if (!current(e.who)) return;
    const auto index = ledger_.find(e.who.slot, e.who.generation, e.report.model_id);
    const Bytes before = index && ledger_.at(*index)->loaded_known() ? ledger_.at(*index)->loaded_bytes : 0;
    if (ledger_.apply_residency(e.who.slot, e.who.generation, e.report)) {
        receipt_since_publish_ = true;
        const auto& entry = *ledger_.at(*index);
        if (entry.loaded_known() && entry.loaded_bytes > before) loaded_more(e.who.slot, entry.loaded_bytes - before);
    }
    recheck_waiting();
}

void Arbiter::on(const event::Dropped& e) {
    if (!current(e.who)) return;
    ledger_.apply_dropped(e.who.slot, e.who.generation, e.model_id);
    receipt_since_publish_ = true;
    recheck_waiting();
}

void Arbiter::on(const event::Admission& e) {
    if (!current(e.who)) return;
    const auto& r = e.request;
    queue_.push_back({e.who, e.correlation, r, e.keep_loaded,
                      admission_target(r.bytes, r.largest_tensor, r.streams, config_.base_reserve), 0});
    ++unanswered_by_slot_[e.who.slot];
    pump();
}

void Arbiter::on(const event::Unloaded& e) {
    if (!current(e.who)) return;
    heard(e.who);
    const auto& receipt = e.receipt;
    const auto index = ledger_.find(e.who.slot, e.who.generation, receipt.model_id);
    const auto subject = model_subject(e.who, receipt.model_id);
    const Bytes freed = receipt.bytes_freed;
    ledger_.apply_unloaded(e.who.slot, e.who.generation, receipt);
    receipt_since_publish_ = true;
    answer_standins(standins_.take_for_model(e.who.slot, receipt.model_id),
                    receipt.deferred ? StandInOutcome::deferred : StandInOutcome::unloaded, freed,
                    receipt.deferred ? kUnknownBytes : receipt.loaded_bytes);
    const auto awaited = working_ ? awaiting_of(e.who.slot, receipt.model_id) : std::vector<Awaiting>::iterator{};
    if (!working_ || awaited == working_->awaiting.end()) {
        recheck_waiting();
        return;
    }
    Awaiting& awaiting = *awaited;
    if (receipt.deferred) {
        note("owner " + who(e.who) + " is busy: eviction of " + model_of(subject) + " deferred to its next boundary",
             subject);
    } else if (!awaiting.detaching && freed < awaiting.asked && index) {
        // A partial unload that falls short ends in a detach, as upstream's model_unload.
        note("owner " + who(e.who) + " freed " + bytes(freed) + " of " + bytes(awaiting.asked) + " asked; detaching " +
                 model_of(subject),
             subject);
        out_->push_back(action::SendDetach{awaiting.owner, Detach{receipt.model_id}});
        awaiting.detaching = true;
        awaiting.asked = ledger_.at(*index)->loaded_or_total();
        awaiting.since_ms = snapshot_->now_ms;
        advance();  // the detach is expected to free less than the partial unload was
        return;
    }
    working_->awaiting.erase(awaited);
    advance();
}

void Arbiter::on(const event::Tick&) {
    const auto now = snapshot_->now_ms;
    const std::string within = " within " + std::to_string(config_.answer_timeout_ms) + " ms";
    // Who let a command go unanswered past the time-out: each is marked deaf below, once
    // the notes say what it did not answer.
    std::vector<Participant> silent;
    const auto late = standins_.take_expired(now, config_.answer_timeout_ms);
    if (!late.empty()) {
        note(std::to_string(late.size()) + " stand-in unload(s) not answered by their owner" + within +
             "; answered as freeing nothing");
    }
    answer_standins(late, StandInOutcome::timed_out, 0, kUnknownBytes);
    for (const auto& p : late) silent.push_back(p.owner);
    if (working_) {
        for (const auto& a : working_->awaiting) {
            if (now - a.since_ms < config_.answer_timeout_ms) continue;
            note("owner " + who(a.owner) + " did not answer" + within + "; moving to the next candidate",
                 model_subject(a.owner, a.model_id));
            silent.push_back(a.owner);
        }
        if (!working_->releasing.empty() && now - working_->releasing_since_ms >= config_.answer_timeout_ms) {
            for (const auto slot : working_->releasing) {
                const Participant sibling{slot, participants_.at(slot).generation};
                note("sibling " + who(sibling) + " did not answer the partial release" + within +
                         "; going on without it",
                     about(sibling));
                silent.push_back(sibling);
            }
        }
    }
    bool waited_on = false;
    for (const auto& p : silent) waited_on = mark_deaf(p) || waited_on;
    if (waited_on) advance();
    std::vector<Request> expired;
    std::erase_if(waiting_, [&](const Request& r) {
        if (r.deadline_ms > now) return false;
        expired.push_back(r);
        return true;
    });
    for (const auto& r : expired) refuse(r, RefusalReason::timed_out);
    recheck_waiting();
}

void Arbiter::on(const event::StandIn& e) {
    if (!current(e.who)) return;
    const StandInUnload& request = e.request;
    const Participant owner{request.owner_slot, request.owner_generation};
    const PendingStandIn pending{e.who, e.correlation, owner, request.model_id, snapshot_->now_ms};
    const auto index = ledger_.find(owner.slot, owner.generation, request.model_id);
    const auto subject = model_subject(owner, request.model_id);
    if (owner.slot == e.who.slot) {
        // The host's own models are real entries of its own list, never stand-ins.
        answer_standins({pending}, StandInOutcome::refused, 0, kUnknownBytes);
        return;
    }
    if (!current(owner) || !index) {
        // Dead, restarted, or the model was dropped since the host last read the ledger.
        answer_standins({pending}, StandInOutcome::owner_gone, 0, 0);
        return;
    }
    if (deaf_.deaf(owner)) {
        // It would not answer: upstream's loop in the host goes on at once instead.
        deaf_.passed_over();
        note("stand-in unload of " + model_of(subject) + " of " + who(owner) +
                 " answered as freeing nothing without asking: its owner is deaf",
             subject);
        answer_standins({pending}, StandInOutcome::timed_out, 0, kUnknownBytes);
        return;
    }
    const bool on_its_way = standins_.in_flight(owner.slot, request.model_id) ||
                            (working_ && awaiting_of(owner.slot, request.model_id) != working_->awaiting.end());
    if (participants_[owner.slot].busy) {
        // As an admission's eviction: a busy owner frees nothing now and runs the command at
        // its next boundary. The host's loop is answered at once, so it never waits out a
        // node of another process with its models locked.
        if (!on_its_way) send_standin_command(owner, request);
        note("stand-in unload of " + model_of(subject) + " of " + who(owner) +
                 " answered as deferred: its owner is busy and runs it at its next boundary",
             subject);
        answer_standins({pending}, StandInOutcome::deferred, 0, kUnknownBytes);
        return;
    }
    standins_.add(pending);
    if (on_its_way) {
        note("stand-in unload of " + model_of(subject) + " of " + who(owner) + " joins the command already sent for it",
             subject);
        return;
    }
    const LedgerEntry& entry = *ledger_.at(*index);
    note("the host's eviction reached the stand-in of " + model_of(subject) + " of " + who(owner) +
             ": asking its owner to " +
             (request.detach ? std::string("detach") : "free " + bytes(static_cast<Bytes>(request.bytes)) + " of") +
             " it (" + bytes(entry.loaded_or_total()) + " loaded)",
         subject);
    send_standin_command(owner, request);
}

void Arbiter::send_standin_command(const Participant& owner, const StandInUnload& request) {
    if (request.detach) {
        out_->push_back(action::SendDetach{owner, Detach{request.model_id}});
    } else {
        out_->push_back(action::SendPartialUnload{owner, PartialUnload{request.model_id, request.bytes}});
    }
}

void Arbiter::answer_standins(std::vector<PendingStandIn> pending, StandInOutcome outcome, Bytes freed,
                              Bytes loaded_after) {
    for (const auto& p : pending) {
        StandInResult result{};
        result.model_id = p.model_id;
        result.bytes_freed = freed;
        result.loaded_bytes = loaded_after;
        result.outcome = static_cast<std::uint32_t>(outcome);
        out_->push_back(action::AnswerStandIn{p.asker, p.correlation, result});
    }
}

// ---- the admission loop ----

bool Arbiter::current(const Participant& p) const {
    const auto found = participants_.find(p.slot);
    return found != participants_.end() && found->second.generation == p.generation;
}

Bytes Arbiter::reported_free_for(const Participant& asker) const { return free_reported_to(*snapshot_, asker.slot); }

Bytes Arbiter::free_for(const Participant& asker) const {
    const Bytes free = reported_free_for(asker);
    // Bytes granted but not yet loaded are spoken for: without this, two grants in one
    // decision (or before the first load shows in the driver's figure) would share them.
    Bytes promised = 0;
    for (const auto& [slot, bytes] : granted_not_loaded_) promised += bytes;
    return free > promised ? free - promised : 0;
}

void Arbiter::pump() {
    while (!working_ && !queue_.empty()) {
        Request next = queue_.front();
        queue_.pop_front();
        start(std::move(next));
    }
}

void Arbiter::start(Request request) {
    // With smart memory off upstream detaches every candidate, however much is free.
    if (config_.smart_memory && fits(request.target, free_for(request.asker))) {
        grant(request, 0);
        return;
    }
    const EvictionQuery query{request.request.device, request.keep_loaded};
    working_ = Working{std::move(request), EvictionQueue(query), {}, std::nullopt, false, {}, 0, {}, {}};
    step();
}

void Arbiter::step() {
    Working& w = *working_;
    const bool for_dynamic = (w.request.request.flags & kAdmitForDynamic) != 0;
    for (;;) {
        const Bytes free = free_for(w.request.asker);
        if (config_.smart_memory && fits(w.request.target, free)) break;
        // What the answers still out should free is spoken for: ask the next owner only
        // for the rest, so one slow owner does not hold up the others.
        const Bytes expected = free + outstanding();
        const double to_free = memory_to_free(w.request.target, expected);
        if (config_.smart_memory && !(to_free > 0)) return;  // resumed by the receipts, deaths or time-outs
        auto candidate = std::exchange(w.held_back, std::nullopt);
        if (!candidate) candidate = w.candidates.next(ledger_);
        if (!candidate) break;
        const EvictionCandidate next = *candidate;
        const Participant owner{next.owner_slot, next.owner_generation};
        const LedgerEntry* still = next.in(ledger_);
        if (still == nullptr) continue;  // dropped, or its owner died, since it was handed out
        const LedgerEntry entry = *still;
        if (for_dynamic && entry.dynamic) {
            // Dynamic models never evict one another: count this one's bytes as needed.
            w.request.target -= static_cast<double>(entry.loaded_or_total());
            continue;
        }
        if (passes_over(w, owner)) continue;
        if (std::any_of(w.awaiting.begin(), w.awaiting.end(), of_owner(owner.slot))) {
            // One command in flight per owner: its answer may change what it should be asked
            // next, and it keeps the rings shallow however many small models an owner holds.
            w.held_back = next;
            return;
        }
        const bool partial = config_.smart_memory && unloads_partially(to_free, entry.loaded_or_total());
        const Bytes asked = partial ? whole_bytes_up(to_free) : entry.loaded_or_total();
        if (partial) {
            out_->push_back(action::SendPartialUnload{owner, PartialUnload{next.model_id, asked}});
        } else {
            out_->push_back(action::SendDetach{owner, Detach{next.model_id}});
        }
        const action::NoteSubject subject{owner, next.model_id, entry.name};
        note(asker(w.request.asker.slot) + " needs " + bytes(w.request.target) + " with " + bytes(free) + " free" +
                 (expected > free ? " and " + bytes(expected - free) + " being freed" : std::string()) + ": asking " +
                 who(owner) + " to " + (partial ? "free " + bytes(asked) + " of" : std::string("detach")) + " " +
                 model_of(subject) + " (" + bytes(entry.loaded_or_total()) + " loaded)" +
                 (config_.smart_memory ? "" : " (smart memory off)"),
             subject);
        // The asker waits for this answer, so it answers even in the middle of a node.
        if (participants_[owner.slot].busy && owner.slot != w.request.asker.slot) {
            // A busy owner frees nothing now; the command runs at its next boundary.
            note("owner " + who(owner) + " is busy: eviction of " + model_of(subject) +
                     " deferred to its next boundary",
                 subject);
            continue;
        }
        w.awaiting.push_back(Awaiting{owner, next.model_id, !partial, asked, snapshot_->now_ms});
    }
    const Bytes free = free_for(w.request.asker);
    if (!fits(w.request.target, free)) {
        if (!w.awaiting.empty() || !w.releasing.empty()) return;
        if (!w.siblings_asked) {
            w.siblings_asked = true;
            if (ask_siblings(w, whole_bytes_up(memory_to_free(w.request.target, free)))) return;
        }
    } else if (!config_.smart_memory && !w.awaiting.empty()) {
        return;  // every detach is answered before the load goes ahead, as in upstream's loop
    }
    // It fits, or nothing more can be asked. Answers still out for this admission are
    // applied to the ledger when they come, as any receipt.
    Request request = std::move(w.request);
    working_.reset();
    if (fits(request.target, free)) {
        grant(request, 0);
    } else {
        no_fit(std::move(request));
    }
}

void Arbiter::advance() {
    step();
    pump();
}

Bytes Arbiter::outstanding() const {
    Bytes sum = 0;
    for (const auto& a : working_->awaiting) sum += a.asked;
    return sum;
}

std::vector<Arbiter::Awaiting>::iterator Arbiter::awaiting_of(std::uint32_t slot, std::uint64_t model_id) {
    return std::find_if(working_->awaiting.begin(), working_->awaiting.end(),
                        [&](const Awaiting& a) { return a.owner.slot == slot && a.model_id == model_id; });
}

void Arbiter::on(const event::Released& e) {
    if (!current(e.who)) return;
    heard(e.who);
    receipt_since_publish_ = true;
    if (working_ && working_->releasing.count(e.who.slot)) {
        sibling_answered(e.who.slot);
        return;
    }
    recheck_waiting();
}

bool Arbiter::ask_siblings(Working& w, Bytes shortfall) {
    // A sibling that holds a model the asker wants kept might release exactly that one.
    // Each kept key names its owner's slot, so those siblings are found from the keep
    // list and the ledger's index: the decision never walks the ledger per sibling.
    std::set<std::uint32_t> holding_kept;
    for (const std::uint64_t key : w.request.keep_loaded) {
        const auto slot = static_cast<std::uint32_t>(key >> kModelIdBits);
        const auto sibling = participants_.find(slot);
        if (sibling != participants_.end() && ledger_.find(slot, sibling->second.generation, key & (kModelIdLimit - 1))) {
            holding_kept.insert(slot);
        }
    }
    for (const auto& [slot, state] : participants_) {
        if (slot == w.request.asker.slot || state.busy || holding_kept.count(slot)) continue;
        if (w.timed_out.count(slot) || deaf_.deaf({slot, state.generation})) continue;  // it would not answer
        out_->push_back(action::SendPartialRelease{{slot, state.generation}, PartialRelease{shortfall}});
        w.releasing.insert(slot);
    }
    if (w.releasing.empty()) return false;
    w.releasing_since_ms = snapshot_->now_ms;
    note(asker(w.request.asker.slot) + " is still " + bytes(shortfall) + " short with the ledger exhausted: asking " +
             std::to_string(w.releasing.size()) + " idle sibling(s) for a partial release",
         about(w.request.asker));
    return true;
}

bool Arbiter::mark_deaf(const Participant& silent) {
    if (deaf_.mark(silent)) out_->push_back(action::Deafness{silent, true});
    // Every wait on it ends here. The host's upstream loop waits on each stand-in unload:
    // none more of this owner's.
    answer_standins(standins_.take_for_owner(silent.slot), StandInOutcome::timed_out, 0, kUnknownBytes);
    if (!working_) return false;
    working_->timed_out.insert(silent.slot);
    const bool awaited = std::erase_if(working_->awaiting, of_owner(silent.slot)) > 0;
    return working_->releasing.erase(silent.slot) > 0 || awaited;
}

void Arbiter::heard(const Participant& answering) {
    if (deaf_.heard(answering)) out_->push_back(action::Deafness{answering, false});
}

bool Arbiter::passes_over(Working& w, const Participant& owner) {
    const bool deaf = deaf_.deaf(owner);
    if (!deaf && !w.timed_out.count(owner.slot)) return false;
    deaf_.passed_over();
    if (w.passed_over.insert(owner.slot).second) {
        note(asker(w.request.asker.slot) + "'s load passes over the models of " + who(owner) + ": " +
                 (deaf ? "it is deaf" : "it let a command of this load go unanswered"),
             about(owner));
    }
    return true;
}

void Arbiter::sibling_answered(std::uint32_t slot) {
    working_->releasing.erase(slot);
    if (working_->releasing.empty()) advance();
}

void Arbiter::no_fit(Request request) {
    const Bytes free = free_for(request.asker);
    const Bytes shortfall = whole_bytes_up(memory_to_free(request.target, free));
    switch (config_.no_fit) {
        case NoFitPolicy::admit:
            note("admitting " + asker(request.asker.slot) + " anyway (policy admit): needs " + bytes(request.target) +
                     ", free " + bytes(free) + ", short " + bytes(shortfall) + ", " +
                     bytes(ledger_.loaded_on(request.request.device)) + " held in the ledger",
                 about(request.asker));
            grant(request, shortfall);
            return;
        case NoFitPolicy::refuse: refuse(request, RefusalReason::no_fit); return;
        case NoFitPolicy::wait:
            request.deadline_ms = snapshot_->now_ms + config_.wait_timeout_ms;
            note(asker(request.asker.slot) + " waits for " + bytes(shortfall) +
                     " more to come free (policy wait, up to " + std::to_string(config_.wait_timeout_ms) + " ms)",
                 about(request.asker));
            waiting_.push_back(std::move(request));
            return;
    }
}

void Arbiter::recheck_waiting() {
    // In arrival order, one at a time: each grant's bytes are spoken for before the next
    // request is measured.
    for (auto it = waiting_.begin(); it != waiting_.end();) {
        if (!fits(it->target, free_for(it->asker))) {
            ++it;
            continue;
        }
        const Request ready = *it;
        it = waiting_.erase(it);
        grant(ready, 0);
    }
}

void Arbiter::grant(const Request& request, Bytes shortfall) {
    // The grant carries the figure the asker's driver would report; what others were
    // granted but have not loaded yet reaches it through the published reserve instead.
    AdmissionGrant grant{};
    grant.device_free = std::min(reported_free_for(request.asker), kMaxBytes);
    grant.reserve_bytes = reserve_for(request.asker.slot);
    grant.shortfall = std::min(shortfall, kMaxBytes);
    grant.vram_state = static_cast<std::uint32_t>(config_.vram_state);
    granted_not_loaded_[request.asker.slot] += request.request.bytes;
    answered(request);
    out_->push_back(action::Grant{request.asker, request.correlation, grant});
}

void Arbiter::refuse(const Request& request, RefusalReason reason) {
    AdmissionRefused refusal{};
    refusal.needed_bytes = whole_bytes_up(request.target);
    // The figure the decision used: free less what others were granted and not loaded yet.
    refusal.device_free = std::min(free_for(request.asker), kMaxBytes);
    const Bytes held_by_others = ledger_.loaded_on(request.request.device, request.asker.slot);
    refusal.held_by_others = std::min(held_by_others, kMaxBytes);
    refusal.reason = static_cast<std::uint32_t>(reason);
    note("refusing " + asker(request.asker.slot) + ": needs " + bytes(request.target) + ", free " +
             bytes(refusal.device_free) + ", others hold " + bytes(held_by_others),
         about(request.asker));
    answered(request);
    out_->push_back(action::Refuse{request.asker, request.correlation, refusal});
}

void Arbiter::answered(const Request& request) {
    const auto count = unanswered_by_slot_.find(request.asker.slot);
    if (--count->second == 0) unanswered_by_slot_.erase(count);
}

Bytes Arbiter::reserve_for(std::uint32_t slot) {
    Bytes unseen = 0;
    for (const auto& [other, granted] : granted_not_loaded_) {
        if (other != slot) unseen += granted;
    }
    const Bytes computed = published_reserve(config_.base_reserve, unseen, snapshot_->device_total);
    Bytes& published = published_reserve_[slot];
    // It grows freely; it shrinks only once a measured receipt has come in.
    published = receipt_since_publish_ ? computed : std::max(published, computed);
    receipt_since_publish_ = false;
    return published;
}

void Arbiter::note(std::string text, action::NoteSubject subject) {
    out_->push_back(action::Note{std::move(text), std::move(subject)});
}

std::string Arbiter::who(const Participant& p) const {
    const auto found = participants_.find(p.slot);
    const bool named = found != participants_.end() && found->second.generation == p.generation;
    return described(p, named ? found->second.name : std::string());
}

std::string Arbiter::asker(std::uint32_t slot) const {
    const auto found = participants_.find(slot);
    const std::string number = "slot " + std::to_string(slot);
    if (found == participants_.end() || found->second.name.empty()) return number;
    return found->second.name + " (" + number + ")";
}

action::NoteSubject Arbiter::model_subject(const Participant& owner, std::uint64_t model_id) const {
    const auto index = ledger_.find(owner.slot, owner.generation, model_id);
    return {owner, model_id, index ? ledger_.at(*index)->name : std::string()};
}

}  // namespace comfy::arbiter
