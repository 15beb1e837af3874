#include "supervisor/memory/admission_waits.hpp"

namespace comfy::supervisor {

void AdmissionWaits::asked(std::uint32_t slot, std::uint64_t correlation, Bytes bytes, Clock::time_point now) {
    pending_[{slot, correlation}] = Pending{bytes, now};
}

std::optional<AdmissionWaits::Answered> AdmissionWaits::answered(std::uint32_t slot, std::uint64_t correlation,
                                                                 Clock::time_point now) {
    const auto found = pending_.find({slot, correlation});
    if (found == pending_.end()) return std::nullopt;
    const Answered answer{found->second.bytes, std::chrono::duration<double>(now - found->second.at).count()};
    pending_.erase(found);
    for (std::size_t i = 0; i < kBuckets.size(); ++i) {
        if (answer.waited_seconds <= kBuckets[i]) ++histogram_.cumulative[i];
    }
    ++histogram_.count;
    histogram_.sum_seconds += answer.waited_seconds;
    return answer;
}

void AdmissionWaits::forget(std::uint32_t slot) {
    std::erase_if(pending_, [slot](const auto& entry) { return entry.first.first == slot; });
}

}  // namespace comfy::supervisor
