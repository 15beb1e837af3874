#pragma once
// A participant's copy of the machine-wide ledger (the supervisor's segment), read again
// only when the supervisor changed it: an idle participant that looks at the ledger every
// half second does no work while the ledger's generation stays where it was, where a read
// of a million rows and their sort cost a tenth of a CPU each time.
//
// The generation is the segment's LedgerGeneration (shared/segment_layout.hpp): loaded with
// acquire order before any row is read, so that the rows read are at least as new as it.
// A row the supervisor was rewriting during the read is left out; the supervisor adds one
// to the generation after that write, so the next look reads the ledger again. Rows are
// validated as everything read from another process is; an invalid one is left out.
//
// With the rows it reads each owner's pack name from the participant table, so that a row
// can be shown as the supervisor shows it (`"sdxl-vae" (model 3 of pack sdxl)`). The
// supervisor writes a participant's record when it starts it, before the participant can
// register a model, so the record of a row's owner is there by the time the row is; a
// record of another generation (the owner restarted since) or with a name no supervisor
// writes gives no name.

#include "shared/records.hpp"
#include "shared/segment_layout.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace comfy::worker {

class LedgerMirror {
public:
    explicit LedgerMirror(const SegmentView& segment) : segment_(segment) {}

    // The ledger's generation now: equal to an earlier value, no row changed since.
    std::uint64_t generation() const noexcept;
    // Every valid row, most recently loaded first, as of the generation current when it
    // was last read: read and sorted again only when the generation moved since.
    const std::vector<LedgerRecord>& rows();
    // The pack name of the owner of `row` (one of rows()), as read with the rows; empty when
    // its record was of another generation, unreadable or not valid.
    std::string_view owner_name(const LedgerRecord& row) const noexcept;
    // How many times rows() read the segment's rows (the others reused the copy).
    std::uint64_t reads() const noexcept { return reads_; }

private:
    struct Owner {
        std::uint32_t generation = 0;  // 0: no name read for the slot
        std::string name;
    };
    void read_owners();

    const SegmentView& segment_;
    std::optional<std::uint64_t> read_at_;  // the generation the copy was read at
    std::vector<LedgerRecord> rows_;
    std::vector<Owner> owners_;  // by slot
    std::uint64_t reads_ = 0;
};

}  // namespace comfy::worker
