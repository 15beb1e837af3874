#include "shared/message_codec.hpp"

#include <algorithm>

namespace comfy {

namespace {

// Each check returns the name of the first field out of range, or nullptr.
using Check = const char*;

constexpr bool is_flag(std::uint8_t v) { return v <= 1; }
constexpr bool is_bytes(std::uint64_t v) { return v <= kMaxBytes; }
constexpr bool is_bytes_or_unknown(std::uint64_t v) { return v <= kMaxBytes || v == kUnknownBytes; }
template <class A>
constexpr bool all_zero(const A& array) {
    return std::all_of(std::begin(array), std::end(array), [](auto b) { return b == 0; });
}

Check check(const Hello& m) {
    if (m.pid <= 0) return "hello.pid";
    if (m.capabilities & ~kKnownCapabilities) return "hello.capabilities";
    return nullptr;
}
Check check(const HelloAck& m) {
    if (m.generation == 0) return "hello_ack.generation";
    if (!is_bytes(m.reserve_bytes)) return "hello_ack.reserve_bytes";
    if (!is_bytes(m.device_total_bytes)) return "hello_ack.device_total_bytes";
    return nullptr;
}
Check check(const Shutdown& m) {
    if (m.grace_ms > kMaxGraceMs) return "shutdown.grace_ms";
    if (m.reserved != 0) return "shutdown.reserved";
    return nullptr;
}
Check check(const ModelRegistered& m) {
    if (m.model_id == 0 || m.model_id >= kModelIdLimit) return "model_registered.model_id";
    if (!is_bytes(m.total_bytes)) return "model_registered.total_bytes";
    if (!is_bytes_or_unknown(m.loaded_bytes)) return "model_registered.loaded_bytes";
    if (m.device >= kMaxDevices) return "model_registered.device";
    if (m.kind >= kModelKindCount) return "model_registered.kind";
    if (!is_flag(m.dynamic)) return "model_registered.dynamic";
    if (m.reserved != 0) return "model_registered.reserved";
    if (!is_valid_name(m.name)) return "model_registered.name";
    return nullptr;
}
Check check(const ResidencyReceipt& m) {
    if (m.model_id == 0) return "residency_receipt.model_id";
    if (!is_bytes_or_unknown(m.loaded_bytes)) return "residency_receipt.loaded_bytes";
    if (!is_flag(m.currently_used)) return "residency_receipt.currently_used";
    if (!is_flag(m.just_used)) return "residency_receipt.just_used";
    if (!all_zero(m.reserved)) return "residency_receipt.reserved";
    return nullptr;
}
Check check(const ModelDropped& m) { return m.model_id == 0 ? "model_dropped.model_id" : nullptr; }
Check check(const AdmissionRequest& m) {
    if (m.device >= kMaxDevices) return "admission_request.device";
    if (m.streams == 0 || m.streams > kMaxStreams) return "admission_request.streams";
    if (!is_bytes(m.bytes)) return "admission_request.bytes";
    if (!is_bytes(m.largest_tensor)) return "admission_request.largest_tensor";
    if (!is_bytes(m.pinned_bytes)) return "admission_request.pinned_bytes";
    if (m.flags & ~kAdmitForDynamic) return "admission_request.flags";
    return nullptr;
}
Check check(const AdmissionKeep& m) {
    if (m.count == 0 || m.count > kKeepKeysPerMessage) return "admission_keep.count";
    if (m.reserved != 0) return "admission_keep.reserved";
    for (std::uint32_t i = 0; i < kKeepKeysPerMessage; ++i) {
        // A used key names a model (ids are never 0); an unused one is all zero.
        if (i < m.count ? (m.keys[i] & (kModelIdLimit - 1)) == 0 : m.keys[i] != 0) return "admission_keep.keys";
    }
    return nullptr;
}
Check check(const AdmissionGrant& m) {
    if (!is_bytes(m.device_free)) return "admission_grant.device_free";
    if (!is_bytes(m.reserve_bytes)) return "admission_grant.reserve_bytes";
    if (!is_bytes(m.shortfall)) return "admission_grant.shortfall";
    if (m.vram_state >= kVramStateCount) return "admission_grant.vram_state";
    if (m.reserved != 0) return "admission_grant.reserved";
    return nullptr;
}
Check check(const AdmissionRefused& m) {
    if (!is_bytes(m.needed_bytes)) return "admission_refused.needed_bytes";
    if (!is_bytes(m.device_free)) return "admission_refused.device_free";
    if (!is_bytes(m.held_by_others)) return "admission_refused.held_by_others";
    if (m.reason >= kRefusalReasonCount) return "admission_refused.reason";
    if (m.reserved != 0) return "admission_refused.reserved";
    return nullptr;
}
Check check(const PartialUnload& m) {
    if (m.model_id == 0) return "partial_unload.model_id";
    if (!is_bytes(m.bytes)) return "partial_unload.bytes";
    return nullptr;
}
Check check(const Detach& m) { return m.model_id == 0 ? "detach.model_id" : nullptr; }
Check check(const UnloadReceipt& m) {
    if (m.model_id == 0) return "unload_receipt.model_id";
    if (!is_bytes(m.bytes_requested)) return "unload_receipt.bytes_requested";
    if (!is_bytes(m.bytes_freed)) return "unload_receipt.bytes_freed";
    if (!is_flag(m.deferred)) return "unload_receipt.deferred";
    if (m.deferred && m.bytes_freed != 0) return "unload_receipt.bytes_freed";
    if (!is_bytes_or_unknown(m.loaded_bytes)) return "unload_receipt.loaded_bytes";
    if (!all_zero(m.reserved)) return "unload_receipt.reserved";
    return nullptr;
}
Check check(const StandInUnload& m) {
    if (m.model_id == 0 || m.model_id >= kModelIdLimit) return "standin_unload.model_id";
    if (m.owner_generation == 0) return "standin_unload.owner_generation";
    if (!is_flag(m.detach)) return "standin_unload.detach";
    if (!is_bytes(m.bytes) || (m.detach ? m.bytes != 0 : m.bytes == 0)) return "standin_unload.bytes";
    if (!all_zero(m.reserved)) return "standin_unload.reserved";
    return nullptr;
}
Check check(const StandInResult& m) {
    if (m.model_id == 0) return "standin_result.model_id";
    if (!is_bytes(m.bytes_freed)) return "standin_result.bytes_freed";
    if (!is_bytes_or_unknown(m.loaded_bytes)) return "standin_result.loaded_bytes";
    if (m.outcome >= kStandInOutcomeCount) return "standin_result.outcome";
    if (m.reserved != 0) return "standin_result.reserved";
    return nullptr;
}
Check check(const ReleaseNodeBoundary& m) { return m.reserved != 0 ? "release_node_boundary.reserved" : nullptr; }
Check check(const CastEpochBoundary&) { return nullptr; }
Check check(const FullRelease& m) {
    if (m.reason >= kFullReleaseReasonCount) return "full_release.reason";
    if (m.reserved != 0) return "full_release.reserved";
    return nullptr;
}
Check check(const PartialRelease& m) { return is_bytes(m.bytes) ? nullptr : "partial_release.bytes"; }
Check check(const ReleasePins& m) { return is_bytes(m.bytes) ? nullptr : "release_pins.bytes"; }
Check check(const ReleaseReceipt& m) {
    if (!is_release(static_cast<MessageType>(m.release_type))) return "release_receipt.release_type";
    if (!is_flag(m.deferred)) return "release_receipt.deferred";
    if (!all_zero(m.reserved)) return "release_receipt.reserved";
    if (!is_bytes(m.bytes_requested)) return "release_receipt.bytes_requested";
    if (!is_bytes(m.bytes_freed)) return "release_receipt.bytes_freed";
    if (m.deferred && m.bytes_freed != 0) return "release_receipt.bytes_freed";
    return nullptr;
}
Check check(const PinRequest& m) { return is_bytes(m.bytes) ? nullptr : "pin_request.bytes"; }
Check check(const PinGrant& m) {
    if (!is_bytes(m.bytes_granted)) return "pin_grant.bytes_granted";
    if (!is_bytes(m.budget_left)) return "pin_grant.budget_left";
    return nullptr;
}
Check check(const NodeStarted& m) {
    return m.activity > static_cast<std::uint32_t>(NodeActivity::callback) ? "node_started.activity" : nullptr;
}
Check check(const NodeFinished& m) { return m.status >= kWorkStatusCount ? "node_finished.status" : nullptr; }
Check check(const WorkRequest& m) {
    if (m.reserved != 0) return "work_request.reserved";
    if (m.node_name[0] == '\0' || !is_valid_name(m.node_name)) return "work_request.node_name";
    return nullptr;
}
Check check(const WorkResult& m) {
    if (m.status >= kWorkStatusCount) return "work_result.status";
    if (!is_bytes(m.device_bytes_in_use)) return "work_result.device_bytes_in_use";
    return nullptr;
}
Check check(const RequestFailed& m) {
    if (m.reason >= kFailureReasonCount) return "request_failed.reason";
    if (m.signal < 0 || m.signal > 64) return "request_failed.signal";
    return nullptr;
}
Check check(const DeviceAllocate& m) { return is_bytes(m.bytes) ? nullptr : "device_allocate.bytes"; }
Check check(const DeviceAllocation& m) {
    if (!is_flag(m.granted)) return "device_allocation.granted";
    if (!all_zero(m.reserved)) return "device_allocation.reserved";
    return nullptr;
}
Check check(const DeviceRelease& m) { return is_bytes(m.bytes) ? nullptr : "device_release.bytes"; }
// Any count is one a pack can have; what it means for a pack is the supervisor's to judge.
Check check(const Ready& m) { return m.reserved != 0 ? "ready.reserved" : nullptr; }

// The variant's alternatives must follow MessageType order, one per type, so that
// variant index + kFirstMessageType is the type.
template <std::size_t... I>
constexpr bool payloads_in_type_order(std::index_sequence<I...>) {
    return ((static_cast<std::size_t>(std::variant_alternative_t<I, Payload>::kType) == I + kFirstMessageType) && ...);
}
static_assert(std::variant_size_v<Payload> == kLastMessageType - kFirstMessageType + 1,
              "every MessageType needs exactly one payload type");
static_assert(payloads_in_type_order(std::make_index_sequence<std::variant_size_v<Payload>>{}),
              "Payload alternatives must be listed in MessageType order");

template <class P>
void decode_as(std::span<const std::byte> payload, DecodeResult& result) {
    static_assert(sizeof(P) <= kMaxPayloadBytes);
    if (result.message.header.payload_size != sizeof(P)) {
        result.error = DecodeError::wrong_size;
        return;
    }
    P value;
    std::memcpy(&value, payload.data(), sizeof(P));
    if (const Check bad = check(value)) {
        result.error = DecodeError::out_of_range;
        result.field = bad;
        return;
    }
    result.message.payload = value;
}

template <std::size_t... I>
void dispatch(std::size_t index, std::span<const std::byte> payload, DecodeResult& result, std::index_sequence<I...>) {
    ((index == I ? decode_as<std::variant_alternative_t<I, Payload>>(payload, result) : void()), ...);
}

template <std::size_t... I>
std::size_t size_at(std::size_t index, std::index_sequence<I...>) {
    std::size_t size = 0;
    ((index == I ? size = sizeof(std::variant_alternative_t<I, Payload>) : 0), ...);
    return size;
}

}  // namespace

std::size_t payload_size(MessageType type) noexcept {
    const auto t = static_cast<std::uint16_t>(type);
    if (t < kFirstMessageType || t > kLastMessageType) return 0;
    return size_at(t - kFirstMessageType, std::make_index_sequence<std::variant_size_v<Payload>>{});
}

std::string_view to_string(MessageType type) noexcept {
    switch (type) {
        case MessageType::hello: return "hello";
        case MessageType::hello_ack: return "hello_ack";
        case MessageType::shutdown: return "shutdown";
        case MessageType::model_registered: return "model_registered";
        case MessageType::residency_receipt: return "residency_receipt";
        case MessageType::model_dropped: return "model_dropped";
        case MessageType::admission_request: return "admission_request";
        case MessageType::admission_grant: return "admission_grant";
        case MessageType::admission_refused: return "admission_refused";
        case MessageType::partial_unload: return "partial_unload";
        case MessageType::detach: return "detach";
        case MessageType::unload_receipt: return "unload_receipt";
        case MessageType::release_node_boundary: return "release_node_boundary";
        case MessageType::cast_epoch_boundary: return "cast_epoch_boundary";
        case MessageType::full_release: return "full_release";
        case MessageType::partial_release: return "partial_release";
        case MessageType::release_pins: return "release_pins";
        case MessageType::release_receipt: return "release_receipt";
        case MessageType::pin_request: return "pin_request";
        case MessageType::pin_grant: return "pin_grant";
        case MessageType::node_started: return "node_started";
        case MessageType::node_finished: return "node_finished";
        case MessageType::work_request: return "work_request";
        case MessageType::work_result: return "work_result";
        case MessageType::request_failed: return "request_failed";
        case MessageType::admission_keep: return "admission_keep";
        case MessageType::standin_unload: return "standin_unload";
        case MessageType::standin_result: return "standin_result";
        case MessageType::device_allocate: return "device_allocate";
        case MessageType::device_allocation: return "device_allocation";
        case MessageType::device_release: return "device_release";
        case MessageType::ready: return "ready";
    }
    return "unknown";
}

std::string_view to_string(DecodeError error) noexcept {
    switch (error) {
        case DecodeError::none: return "none";
        case DecodeError::truncated: return "truncated";
        case DecodeError::oversized: return "oversized";
        case DecodeError::unknown_type: return "unknown_type";
        case DecodeError::bad_version: return "bad_version";
        case DecodeError::wrong_size: return "wrong_size";
        case DecodeError::out_of_range: return "out_of_range";
    }
    return "unknown";
}

std::string DecodeResult::describe() const {
    std::string text(to_string(error));
    if (error == DecodeError::out_of_range) text += std::string(" (") + field + ")";
    return text;
}

DecodeResult decode(std::span<const std::byte> bytes) noexcept {
    DecodeResult result;
    if (bytes.size() < sizeof(MessageHeader)) {
        result.error = DecodeError::truncated;
        return result;
    }
    if (bytes.size() > sizeof(MessageSlot)) {
        result.error = DecodeError::oversized;
        return result;
    }
    MessageHeader& header = result.message.header;
    std::memcpy(&header, bytes.data(), sizeof header);
    if (header.type < kFirstMessageType || header.type > kLastMessageType) {
        result.error = DecodeError::unknown_type;
        return result;
    }
    if (header.version != kMessageVersion) {
        result.error = DecodeError::bad_version;
        return result;
    }
    if (header.payload_size > kMaxPayloadBytes) {
        result.error = DecodeError::oversized;
        return result;
    }
    const auto payload = bytes.subspan(sizeof(MessageHeader));
    if (header.payload_size > payload.size()) {
        result.error = DecodeError::truncated;
        return result;
    }
    if (header.reserved != 0) {
        result.error = DecodeError::out_of_range;
        result.field = "header.reserved";
        return result;
    }
    dispatch(header.type - kFirstMessageType, payload, result, std::make_index_sequence<std::variant_size_v<Payload>>{});
    return result;
}

}  // namespace comfy
