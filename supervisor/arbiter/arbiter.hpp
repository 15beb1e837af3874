#pragma once
// Room arbiter/: the pure memory core, events in and decisions out, with no clock and no
// I/O, so that a recorded run replays to the same decisions (trace.hpp).
//
// The memory arbiter: upstream's admission and eviction rules over the whole machine.
// One admission is worked at a time, in arrival order: compute the target (a float, as
// upstream's), and while the asker's free figure is short, ask candidates' owners, the
// asker itself among them, in upstream's order, to free the shortfall (partial unload,
// then detach if it falls short); with smart memory off, detach every candidate. Owners are separate
// processes, so the commands that together cover the shortfall go out at once instead of
// one round trip after another: each next candidate is asked for what the earlier
// outstanding asks leave, and an owner has at most one command in flight. Free is re-read
// at every receipt; with honest receipts the victims and the bytes asked are the ones
// upstream's one-at-a-time loop would choose.
// A dead owner's entry counts as freed, a busy owner is deferred to its next boundary,
// and a request that still does not fit follows the configured no-fit policy. An owner
// that lets a command go unanswered past the answer time-out is deaf: passed over until
// it answers again (deaf_participants.hpp), and never waited on twice by one admission,
// so a load waits at most one answer time-out per deaf participant.
// Queued requests are started by one loop (pump), never from inside the finish of the one
// before: a participant that queues thousands of requests must not deepen the stack.
// The host's stand-in unloads (upstream's own eviction reaching another process's model)
// are not queued: each goes to its owner at once, or joins the command already on its way
// for that model, so the same bytes are never asked for twice, and is answered with the
// owner's receipt.

#include "supervisor/arbiter/arbiter_io.hpp"
#include "supervisor/arbiter/deaf_participants.hpp"
#include "supervisor/arbiter/eviction_order.hpp"
#include "supervisor/arbiter/ledger.hpp"
#include "supervisor/arbiter/standin_unloads.hpp"

#include <deque>
#include <set>
#include <optional>

namespace comfy::arbiter {

class Arbiter {
public:
    Arbiter(ArbiterConfig config, std::uint32_t ledger_capacity);

    // Handles one event against the world in `snapshot`; returns what to do, in order.
    std::vector<Action> handle(const Event& event, const Snapshot& snapshot);

    const Ledger& ledger() const noexcept { return ledger_; }
    Ledger& ledger() noexcept { return ledger_; }
    const ArbiterConfig& config() const noexcept { return config_; }
    // Requests taken in but not yet answered (queued, being worked, or waiting).
    std::size_t unanswered() const noexcept;
    // Those of the participant in `slot`.
    std::size_t unanswered(std::uint32_t slot) const;
    // Requests dropped unanswered because their asker left first: with those answered and
    // those unanswered, every request taken in.
    std::uint64_t withdrawn() const noexcept { return withdrawn_; }
    // The participants passed over for not answering, and how often they were.
    const DeafParticipants& deaf() const noexcept { return deaf_; }

private:
    struct Request {
        Participant asker;
        std::uint64_t correlation;
        AdmissionRequest request;
        std::vector<std::uint64_t> keep_loaded;
        double target;  // upstream's float, never rounded
        std::uint64_t deadline_ms = 0;  // policy wait only
    };
    // An eviction command sent and not yet answered.
    struct Awaiting {
        Participant owner;
        std::uint64_t model_id;
        bool detaching;
        Bytes asked;  // what the command should free: the bytes asked, or all loaded for a detach
        std::uint64_t since_ms;
    };
    struct Working {
        Request request;
        EvictionQueue candidates;
        std::vector<Awaiting> awaiting;
        std::optional<EvictionCandidate> held_back;  // next in order; its owner is still answering
        bool siblings_asked = false;      // partial_release went out once the ledger ran dry
        std::set<std::uint32_t> releasing;  // siblings whose release receipt is awaited
        std::uint64_t releasing_since_ms = 0;
        // Owners that let a command time out while this admission was worked: never waited
        // on again by it, even once they answer, so that it waits one time-out per owner.
        std::set<std::uint32_t> timed_out;
        std::set<std::uint32_t> passed_over;  // owners whose models it skipped, noted once each
    };
    struct ParticipantState {
        std::uint32_t generation;
        bool busy;
        std::string name;  // its pack's, for the notes; maybe empty
    };

    void on(const event::Joined& e);
    void on(const event::Left& e);
    void on(const event::Busy& e);
    void on(const event::Registered& e);
    void on(const event::Residency& e);
    void on(const event::Dropped& e);
    void on(const event::Admission& e);
    void on(const event::Unloaded& e);
    void on(const event::Tick& e);
    void on(const event::Released& e);
    void on(const event::StandIn& e);
    void answer_standins(std::vector<PendingStandIn> pending, StandInOutcome outcome, Bytes freed, Bytes loaded_after);
    // The command a stand-in unload asks of its owner, as the host asked it.
    void send_standin_command(const Participant& owner, const StandInUnload& request);
    // Asks the idle siblings (not the asker, none holding a kept model) for a partial
    // release of the shortfall; true when at least one was asked.
    bool ask_siblings(Working& w, Bytes shortfall);
    void sibling_answered(std::uint32_t slot);
    // `who` let a command go unanswered past the answer time-out: marks it deaf and stops
    // waiting on it (its outstanding evictions, its partial release, the host's stand-in
    // unloads of its models). True when the admission being worked waited on it.
    bool mark_deaf(const Participant& who);
    // `who` answered something: no longer deaf.
    void heard(const Participant& who);
    // Whether the admission being worked skips `owner`'s models (it is deaf, or let one of
    // this admission's commands time out); counts and notes the skip.
    bool passes_over(Working& w, const Participant& owner);

    bool current(const Participant& who) const;
    // A participant's report shows `bytes` more loaded: that much of its grants is used.
    void loaded_more(std::uint32_t slot, Bytes bytes);
    // What the asker's own reading would say: driver free plus its own allocator cache.
    Bytes reported_free_for(const Participant& asker) const;
    // What decisions use: that, less what was granted and not loaded yet.
    Bytes free_for(const Participant& asker) const;
    // Starts queued requests, in order, while none is being worked. The only loop over the
    // queue: start() and step() never call it, so the stack stays as deep however long it is.
    void pump();
    void start(Request request);
    // Works the admission in hand: asks the next owners, or answers it once it fits or
    // nothing more can be asked. It never starts the next request.
    void step();
    // step(), then the requests queued behind the one it may have answered.
    void advance();
    // The answers still expected to free memory for the admission being worked.
    Bytes outstanding() const;
    std::vector<Awaiting>::iterator awaiting_of(std::uint32_t slot, std::uint64_t model_id);
    void no_fit(Request request);
    void grant(const Request& request, Bytes shortfall);
    void refuse(const Request& request, RefusalReason reason);
    // Every grant and refusal ends here: the asker has one request fewer unanswered.
    void answered(const Request& request);
    void recheck_waiting();
    Bytes reserve_for(std::uint32_t slot);
    void note(std::string text, action::NoteSubject subject = {});
    // How the notes name a participant, an asker and a model: by name where known, and by
    // number always (scripts read the numbers).
    std::string who(const Participant& p) const;
    std::string asker(std::uint32_t slot) const;
    // The ledger row's model of `slot`'s life `generation`, or `model_id` alone once gone.
    action::NoteSubject model_subject(const Participant& owner, std::uint64_t model_id) const;

    ArbiterConfig config_;
    Ledger ledger_;
    std::map<std::uint32_t, ParticipantState> participants_;
    // Admitted bytes not yet reported loaded; they count as used until the owner's
    // reports show them, or its node ends.
    std::map<std::uint32_t, Bytes> granted_not_loaded_;
    std::map<std::uint32_t, Bytes> published_reserve_;
    bool receipt_since_publish_ = false;
    std::deque<Request> queue_;
    std::map<std::uint32_t, std::size_t> unanswered_by_slot_;  // no entry: none
    std::optional<Working> working_;
    std::vector<Request> waiting_;
    StandInUnloads standins_;
    DeafParticipants deaf_;
    std::uint64_t withdrawn_ = 0;
    // Valid only inside handle():
    const Snapshot* snapshot_ = nullptr;
    std::vector<Action>* out_ = nullptr;
};

}  // namespace comfy::arbiter
