#include "supervisor/census_reader.hpp"

#include "shared/device_accounting.hpp"
#include "shared/memory_arithmetic.hpp"

namespace comfy::supervisor {

namespace {
// Figures no machine has (shared memory is input): such a census is not believed.
bool plausible(const CensusRecord& census) {
    return census.allocator_reserved <= kMaxBytes && census.allocator_active <= kMaxBytes &&
           census.pinned_bytes <= kMaxBytes && census.resident_set_bytes <= kMaxBytes;
}
}  // namespace

CensusReader::CensusReader(const SegmentView& view, const worker::Device* cuda)
    : view_(view), cuda_(cuda), slots_(view.capacities().participants) {}

void CensusReader::expect(std::uint32_t slot, std::optional<std::uint32_t> generation) {
    slots_.at(slot).expected = generation;
    judge(slot);
}

template <class T>
bool CensusReader::catch_up(const ipc::Seqlock<T>& lock, Cached<T>& cached) {
    if (cached.whole() && lock.sequence() == cached.sequence) return false;
    if (lock.read(cached.value, cached.sequence) != ipc::SeqlockRead::ok) cached.sequence = Cached<T>::kNotRead;
    return true;
}

void CensusReader::refresh() {
    for (std::uint32_t slot = 0; slot < slots_.size(); ++slot) {
        Slot& s = slots_[slot];
        if (catch_up(view_.census(slot).census, s.census)) {
            judge(slot);
            device_used_stale_ = true;
        }
        // As device_accounting: a census claiming nothing adds nothing, so its participant
        // record need not be read (nor waited on).
        if (s.census.whole() && s.census.value.device_used_bytes == 0) continue;
        if (catch_up(view_.participant(slot).record, s.participant)) device_used_stale_ = true;
    }
}

void CensusReader::judge(std::uint32_t slot) {
    const Slot& s = slots_[slot];
    const CensusRecord& census = s.census.value;
    if (s.expected && s.census.whole() && census.generation == *s.expected && plausible(census)) {
        believable_[slot] = census;
        snapshot_.participants[slot] = {census.allocator_reserved, census.allocator_active, census.pinned_bytes};
    } else {
        believable_.erase(slot);
        snapshot_.participants.erase(slot);
    }
}

std::uint64_t CensusReader::simulated_device_used() {
    if (!device_used_stale_) return device_used_;
    // simulated_device_used()'s rule over the records as last read whole. No fence here:
    // the supervisor publishes no census of its own that its reading must follow.
    DeviceUseTally tally;
    device_used_ = [&] {
        for (const Slot& s : slots_) {
            if (!s.census.whole()) return view_.device_total_bytes();  // mid-write: the device counts as full
            if (s.census.value.device_used_bytes == 0) continue;
            if (!s.participant.whole()) return view_.device_total_bytes();
            tally.add(s.participant.value, s.census.value);
        }
        return tally.counted_bytes();
    }();
    // A record still mid-write is read again at the next refresh, which marks the sum stale.
    device_used_stale_ = false;
    return device_used_;
}

const arbiter::Snapshot& CensusReader::snapshot(std::uint64_t now_ms) {
    refresh();
    snapshot_.now_ms = now_ms;
    if (cuda_ != nullptr) {
        snapshot_.device_total = cuda_->total_bytes();
        snapshot_.device_free = cuda_->free_bytes();
    } else {
        snapshot_.device_total = view_.device_total_bytes();
        const std::uint64_t used = simulated_device_used();
        snapshot_.device_free = used >= snapshot_.device_total ? 0 : snapshot_.device_total - used;
    }
    return snapshot_;
}

}  // namespace comfy::supervisor
