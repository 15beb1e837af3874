#pragma once
// The participants the arbiter no longer waits on. One that lets a command the arbiter
// waits on (an eviction, a partial release, a stand-in unload) go unanswered past the
// answer time-out is deaf until it answers anything again: its models are passed over,
// it is not asked for releases, and a stand-in unload of its models is answered at once.
// So a silent participant costs the machine's loads one answer time-out in all, not one
// per model it holds (682 one-MiB models once stalled every other load for 57 minutes).
// Upstream has no such case: its owners are one process, which always answers.

#include "supervisor/arbiter/arbiter_io.hpp"

#include <cstdint>
#include <map>

namespace comfy::arbiter {

class DeafParticipants {
public:
    // Marks `who` deaf; false when it was deaf already.
    bool mark(const Participant& who);
    // `who` answered something: true when it was deaf, and is no longer.
    bool heard(const Participant& who);
    bool deaf(const Participant& who) const;
    // Its life ended: a new life starts hearing.
    void forget(std::uint32_t slot) { deaf_.erase(slot); }
    std::size_t size() const noexcept { return deaf_.size(); }

    // One eviction candidate or stand-in unload not asked because its owner was deaf.
    void passed_over() noexcept { ++passed_over_; }
    std::uint64_t passed_over_count() const noexcept { return passed_over_; }

private:
    std::map<std::uint32_t, std::uint32_t> deaf_;  // slot -> the deaf generation
    std::uint64_t passed_over_ = 0;
};

}  // namespace comfy::arbiter
