#include "supervisor/lifecycle/outbox.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace comfy::supervisor {

namespace {

MessageType type_of(const MessageSlot& message) { return static_cast<MessageType>(message.header.type); }

bool is_answer(MessageType type) {
    return type == MessageType::admission_grant || type == MessageType::admission_refused ||
           type == MessageType::pin_grant || type == MessageType::release_node_boundary ||
           type == MessageType::standin_result || type == MessageType::device_allocation;
}

// Releases the supervisor sends of its own accord: only the latest of a kind matters.
bool is_replaceable_release(MessageType type) {
    return type == MessageType::cast_epoch_boundary || type == MessageType::full_release ||
           type == MessageType::partial_release || type == MessageType::release_pins;
}

// Both eviction payloads start with the model's id.
std::uint64_t evicted_model(const MessageSlot& message) {
    std::uint64_t model_id = 0;
    std::memcpy(&model_id, message.payload.data(), sizeof model_id);
    return model_id;
}

// Whether `later` makes `waiting` pointless: the same release kind, or an eviction of the same model.
bool replaces(const MessageSlot& later, const MessageSlot& waiting) {
    const MessageType type = type_of(later);
    if (is_replaceable_release(type)) return type_of(waiting) == type;
    return is_eviction(type) && is_eviction(type_of(waiting)) && evicted_model(later) == evicted_model(waiting);
}

}  // namespace

void Outbox::push_back(const MessageSlot& message) {
    const auto waiting = std::find_if(messages_.begin(), messages_.end(),
                                      [&](const MessageSlot& m) { return replaces(message, m); });
    if (waiting != messages_.end()) {
        // A detach waiting already frees the whole model: a partial unload adds nothing.
        if (type_of(*waiting) == MessageType::detach && type_of(message) == MessageType::partial_unload) return;
        messages_.erase(waiting);
    }
    messages_.push_back(message);
    if (is_answer(type_of(message))) ++answers_;
}

void Outbox::pop_front() {
    if (is_answer(type_of(messages_.front()))) --answers_;
    messages_.pop_front();
}

void Outbox::clear() noexcept {
    messages_.clear();
    answers_ = 0;
}

}  // namespace comfy::supervisor
