#include "supervisor/memory/segment_writer.hpp"

namespace comfy::supervisor {

SegmentWriter::SegmentWriter(const SegmentView& view) {
    const auto& caps = view.capacities();
    participants_.reserve(caps.participants);
    census_reports_.reserve(caps.participants);
    for (std::uint32_t slot = 0; slot < caps.participants; ++slot) {
        participants_.emplace_back(view.participant(slot).record);
        census_reports_.emplace_back(view.participant(slot).census);
    }
    ledger_.reserve(caps.ledger_entries);
    for (std::uint32_t row = 0; row < caps.ledger_entries; ++row) ledger_.emplace_back(view.ledger(row).entry);
}

}  // namespace comfy::supervisor
