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
    forget(slot);
    slots_[slot].census = &census;
    slots_[slot].generation = generation;
    catch_up(slots_[slot]);
    judge(slot);
}

void CensusReader::forget(std::uint32_t slot) {
    Slot& s = slots_.at(slot);
    s.census = nullptr;
    s.generation = 0;
    s.value = CensusRecord{};
    s.sequence = 1;
    s.status = CensusStatus::unread;
    judge(slot);  // takes it out of the believable set and the figures
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

void CensusReader::heard_from(std::uint32_t slot) {
    if (slot < slots_.size() && catch_up(slots_[slot])) judge(slot);
}

void CensusReader::refresh() {
    for (std::uint32_t slot = 0; slot < slots_.size(); ++slot) {
        if (catch_up(slots_[slot])) judge(slot);
    }
}

void CensusReader::judge(std::uint32_t slot) {
    Slot& s = slots_[slot];
    changed_.push_back(slot);
    if (s.status != CensusStatus::ok) {
        if (s.believed) {
            believable_.erase(*s.believed);
            snapshot_.participants.erase(*s.figures);
            s.believed.reset();
            s.figures.reset();
        }
        return;
    }
    const arbiter::ParticipantFigures figures{s.value.allocator_reserved, s.value.allocator_active,
                                              s.value.pinned_bytes};
    if (s.believed) {
        // Believed before: updated in place, where it stands in both maps, whatever their size.
        (*s.believed)->second = s.value;
        (*s.figures)->second = figures;
        return;
    }
    s.believed = believable_.insert_or_assign(slot, s.value).first;
    s.figures = snapshot_.participants.insert_or_assign(slot, figures).first;
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
