#include "supervisor/memory/census_reader.hpp"

#include "shared/memory_arithmetic.hpp"

#include <algorithm>
#include <utility>

namespace comfy::supervisor {

namespace {
// Figures no machine has (shared memory is input): such a census is not believed.
bool plausible(const CensusRecord& census) {
    return census.allocator_reserved <= kMaxBytes && census.allocator_active <= kMaxBytes &&
           census.pinned_bytes <= kMaxBytes && census.resident_set_bytes <= kMaxBytes &&
           census.device_used_bytes <= kMaxBytes && census.cast_buffer_bytes <= kMaxBytes;
}
}  // namespace

CensusReader::CensusReader(const SegmentView& view, const SimulatedDeviceUse* simulated, const worker::Device* cuda)
    : simulated_(simulated), cuda_(cuda), slots_(view.capacities().participants) {}

void CensusReader::watch(std::uint32_t slot, const CensusSlot& census, std::uint32_t generation) {
    slots_.at(slot) = Slot{&census, generation};
    catch_up(slots_[slot]);
    judge(slot);
}

void CensusReader::forget(std::uint32_t slot) {
    slots_.at(slot) = Slot{};
    judge(slot);
}

bool CensusReader::catch_up(Slot& s) {
    if (s.census == nullptr) return false;
    if ((s.sequence & 1u) == 0 && s.census->census.sequence() == s.sequence) return false;
    CensusRecord read{};
    std::uint32_t sequence = 0;
    if (s.census->census.read(read, sequence) != ipc::SeqlockRead::ok) {
        s.sequence = 1;
        s.value = CensusRecord{};
        s.status = CensusStatus::unreadable;
        return true;
    }
    s.sequence = sequence;
    s.value = read;
    s.status = sequence == 0                     ? CensusStatus::unread  // not written yet: a fresh region
               : !plausible(read)                ? CensusStatus::unreadable
               : read.generation != s.generation ? CensusStatus::stale
                                                 : CensusStatus::ok;
    return true;
}

void CensusReader::refresh() {
    for (std::uint32_t slot = 0; slot < slots_.size(); ++slot) {
        if (catch_up(slots_[slot])) judge(slot);
    }
}

void CensusReader::judge(std::uint32_t slot) {
    const Slot& s = slots_[slot];
    changed_.push_back(slot);
    if (s.status == CensusStatus::ok) {
        believable_[slot] = s.value;
        snapshot_.participants[slot] = {s.value.allocator_reserved, s.value.allocator_active, s.value.pinned_bytes};
    } else {
        believable_.erase(slot);
        snapshot_.participants.erase(slot);
    }
}

std::vector<std::uint32_t> CensusReader::take_changed() {
    std::sort(changed_.begin(), changed_.end());
    changed_.erase(std::unique(changed_.begin(), changed_.end()), changed_.end());
    return std::exchange(changed_, {});
}

CensusReport CensusReader::report(std::uint32_t slot) const {
    const Slot& s = slots_.at(slot);
    CensusReport report{};
    report.status = static_cast<std::uint8_t>(s.status);
    if (s.status == CensusStatus::ok || s.status == CensusStatus::stale) report.census = s.value;
    // Relaxed: a counter shown as is; nothing else is read through it.
    if (s.census != nullptr) report.heartbeat = s.census->heartbeat.load(std::memory_order_relaxed);
    return report;
}

const arbiter::Snapshot& CensusReader::snapshot(std::uint64_t now_ms) {
    refresh();
    snapshot_.now_ms = now_ms;
    if (cuda_ != nullptr) {
        snapshot_.device_total = cuda_->total_bytes();
        snapshot_.device_free = cuda_->free_bytes();
    } else {
        // The supervisor's own account: used never exceeds the total.
        snapshot_.device_total = simulated_->total();
        snapshot_.device_free = simulated_->total() - simulated_->used();
    }
    return snapshot_;
}

}  // namespace comfy::supervisor
