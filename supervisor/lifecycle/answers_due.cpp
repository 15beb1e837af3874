#include "supervisor/lifecycle/answers_due.hpp"

#include "shared/message_payloads.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

namespace comfy::supervisor {

namespace {

constexpr auto kFirstRelease = static_cast<std::size_t>(MessageType::release_node_boundary);
static_assert(static_cast<std::size_t>(MessageType::release_pins) - kFirstRelease == 4,
              "the five release types are consecutive, from release_node_boundary to release_pins");

template <class P>
P payload_of(const MessageSlot& message) {
    P payload{};
    std::memcpy(&payload, message.payload.data(), sizeof payload);
    return payload;
}

// The bytes a release asks for, where its kind names a figure.
std::uint64_t asked_by(const MessageSlot& message) {
    switch (static_cast<MessageType>(message.header.type)) {
        case MessageType::partial_release: return payload_of<PartialRelease>(message).bytes;
        case MessageType::release_pins: return payload_of<ReleasePins>(message).bytes;
        default: return 0;
    }
}

}  // namespace

void AnswersDue::sent(const MessageSlot& message) {
    const auto type = static_cast<MessageType>(message.header.type);
    if (is_release(type)) {
        Releases& due = releases_[static_cast<std::size_t>(type) - kFirstRelease];
        if (due.count < std::numeric_limits<std::uint32_t>::max()) ++due.count;
        due.most_asked = std::max(due.most_asked, asked_by(message));
    } else if (is_eviction(type)) {
        // Both eviction payloads start with the model's id.
        const std::uint64_t model_id = payload_of<Detach>(message).model_id;
        const auto found = evictions_.find(model_id);
        if (found != evictions_.end()) {
            if (found->second < std::numeric_limits<std::uint32_t>::max()) ++found->second;
        } else if (evictions_.size() < model_limit_) {
            evictions_.emplace(model_id, 1);
        }
    }
}

std::optional<std::uint64_t> AnswersDue::settle_release(MessageType type, bool deferred) {
    if (!is_release(type)) return std::nullopt;
    Releases& due = releases_[static_cast<std::size_t>(type) - kFirstRelease];
    if (due.count == 0) return std::nullopt;
    const std::uint64_t asked = due.most_asked;
    if (!deferred && --due.count == 0) due.most_asked = 0;
    return asked;
}

bool AnswersDue::settle_eviction(std::uint64_t model_id, bool deferred) {
    const auto found = evictions_.find(model_id);
    if (found == evictions_.end()) return false;
    if (!deferred && --found->second == 0) evictions_.erase(found);
    return true;
}

void AnswersDue::clear() noexcept {
    releases_ = {};
    evictions_.clear();
}

}  // namespace comfy::supervisor
