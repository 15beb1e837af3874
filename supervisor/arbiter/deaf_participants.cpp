#include "supervisor/arbiter/deaf_participants.hpp"

namespace comfy::arbiter {

bool DeafParticipants::mark(const Participant& who) {
    const auto [at, added] = deaf_.try_emplace(who.slot, who.generation);
    if (added || at->second == who.generation) return added;
    at->second = who.generation;  // an earlier life's mark the arbiter did not hear end
    return true;
}

bool DeafParticipants::heard(const Participant& who) {
    const auto found = deaf_.find(who.slot);
    if (found == deaf_.end() || found->second != who.generation) return false;
    deaf_.erase(found);
    return true;
}

bool DeafParticipants::deaf(const Participant& who) const {
    const auto found = deaf_.find(who.slot);
    return found != deaf_.end() && found->second == who.generation;
}

}  // namespace comfy::arbiter
