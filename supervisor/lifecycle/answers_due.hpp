#pragma once
// What a participant's life was asked and has not answered yet: the release messages that
// went into its ring, by kind, and the evictions, by model. A receipt counts in the
// supervisor's figures (memory/release_totals.hpp) only when it answers something due
// here, so a participant that reports work nobody asked of it ("200 PiB freed") changes
// no figure. A receipt settles one ask; a deferred one (the participant is busy and will
// do it at its next boundary, then answer again) settles nothing.
//
// Whatever the participant does, this stays small: per release kind a count and the
// largest figure asked, and evictions due for at most `model_limit` models (the ledger's
// capacity: a participant is asked to evict only models it holds there).

#include "shared/message_header.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>

namespace comfy::supervisor {

class AnswersDue {
public:
    explicit AnswersDue(std::size_t model_limit) : model_limit_(model_limit) {}

    // `message` went into the participant's ring: a release or an eviction is now due.
    void sent(const MessageSlot& message);
    // A receipt for the release `type` came. Nothing when none was due; otherwise the most
    // bytes any release of that kind due asked for (0 for kinds that name no figure).
    std::optional<std::uint64_t> settle_release(MessageType type, bool deferred);
    // An unload receipt for `model_id` came: whether an eviction of it was due.
    bool settle_eviction(std::uint64_t model_id, bool deferred);
    // A new life owes nothing.
    void clear() noexcept;

private:
    struct Releases {
        std::uint32_t count = 0;
        std::uint64_t most_asked = 0;
    };
    static constexpr std::size_t kReleaseKinds = 5;

    std::array<Releases, kReleaseKinds> releases_{};
    std::map<std::uint64_t, std::uint32_t> evictions_;  // model id -> evictions due
    std::size_t model_limit_;
};

}  // namespace comfy::supervisor
