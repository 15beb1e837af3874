#pragma once
// The messages for one participant that did not fit in its ring yet, in order. A
// participant that stops reading its ring must not make this grow without bound, whatever
// it or the others send:
// - what answers its own messages (admission, pin and device allocation answers, the
//   release after a node it ended) is counted, and counts against its outstanding requests (limits.outstanding_requests);
// - what the others' doings send it is kept once: a later release of the same kind (epoch
//   boundary, full, partial, pins) replaces the one still waiting, and a later eviction of
//   a model replaces the one still waiting for that model (a detach is never weakened to a
//   partial unload), so at most one per model it holds in the ledger waits.
// What is left is the workload's own work and once-per-life messages.

#include "shared/message_header.hpp"

#include <cstddef>
#include <deque>

namespace comfy::supervisor {

class Outbox {
public:
    void push_back(const MessageSlot& message);
    const MessageSlot& front() const { return messages_.front(); }
    void pop_front();
    bool empty() const noexcept { return messages_.empty(); }
    std::size_t size() const noexcept { return messages_.size(); }
    void clear() noexcept;

    // The answers to the participant's own messages among them.
    std::size_t answers() const noexcept { return answers_; }

private:
    std::deque<MessageSlot> messages_;
    std::size_t answers_ = 0;
};

}  // namespace comfy::supervisor
