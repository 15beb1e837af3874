#include "supervisor/memory/segment_writer.hpp"

namespace comfy::supervisor {

SegmentWriter::SegmentWriter(const SegmentView& view, const SegmentView& published)
    : device_(view.device()),
      published_device_(published.device()),
      ledger_generation_(view.ledger_generation()),
      published_ledger_generation_(published.ledger_generation()) {
    const auto& caps = view.capacities();
    participants_.reserve(caps.participants);
    census_reports_.reserve(caps.participants);
    for (std::uint32_t slot = 0; slot < caps.participants; ++slot) {
        participants_.push_back({ipc::SeqlockWriter<ParticipantRecord>(view.participant(slot).record),
                                 ipc::SeqlockWriter<ParticipantRecord>(published.participant(slot).record)});
        census_reports_.push_back({ipc::SeqlockWriter<CensusReport>(view.participant(slot).census),
                                   ipc::SeqlockWriter<CensusReport>(published.participant(slot).census)});
    }
    ledger_.reserve(caps.ledger_entries);
    for (std::uint32_t row = 0; row < caps.ledger_entries; ++row) {
        ledger_.push_back({ipc::SeqlockWriter<LedgerRecord>(view.ledger(row).entry),
                           ipc::SeqlockWriter<LedgerRecord>(published.ledger(row).entry)});
    }
}

void SegmentWriter::device_used(Bytes bytes) noexcept {
    // Relaxed: one figure, read as it is; a participant's allocation is decided by the
    // supervisor, never by what a reader loaded here.
    device_.used_bytes.store(bytes, std::memory_order_relaxed);
    published_device_.used_bytes.store(bytes, std::memory_order_relaxed);
}

void SegmentWriter::ledger_changed() noexcept {
    ++ledger_generation_value_;
    // Release: the rows written before it are visible to a reader that loads this count
    // with acquire (its only use); the segment's one writer is this thread.
    ledger_generation_.value.store(ledger_generation_value_, std::memory_order_release);
    published_ledger_generation_.value.store(ledger_generation_value_, std::memory_order_release);
}

}  // namespace comfy::supervisor
