#pragma once
// Encoding a typed payload into a ring slot, and decoding any slot back with full
// validation. Decoding never reads past the slot, never trusts a size or an enum from
// the wire, and has no undefined behaviour on any input: a slot is another process's
// bytes (rule 2, "shared memory is input, not truth").

#include "shared/message_header.hpp"
#include "shared/message_payloads.hpp"

#include <cstring>
#include <span>
#include <string>
#include <variant>

namespace comfy {

// Every payload type, in MessageType order (checked at compile time in the .cpp).
using Payload = std::variant<Hello, HelloAck, Shutdown, ModelRegistered, ResidencyReceipt, ModelDropped,
                             AdmissionRequest, AdmissionGrant, AdmissionRefused, PartialUnload, Detach, UnloadReceipt,
                             ReleaseNodeBoundary, CastEpochBoundary, FullRelease, PartialRelease, ReleasePins,
                             ReleaseReceipt, PinRequest, PinGrant, NodeStarted, NodeFinished, WorkRequest, WorkResult,
                             RequestFailed, AdmissionKeep, StandInUnload, StandInResult, DeviceAllocate,
                             DeviceAllocation, DeviceRelease, Ready>;

struct Message {
    MessageHeader header;
    Payload payload;

    MessageType type() const noexcept { return static_cast<MessageType>(header.type); }
};

enum class DecodeError {
    none = 0,
    truncated,     // fewer bytes than a header, or than the header's payload size
    oversized,     // more bytes than a slot, or a payload size larger than a slot holds
    unknown_type,  // no such MessageType
    bad_version,   // the sender speaks another protocol version
    wrong_size,    // the payload size is not that of the type
    out_of_range,  // a field holds a value it can never hold
};

std::string_view to_string(DecodeError error) noexcept;

struct DecodeResult {
    DecodeError error = DecodeError::none;
    const char* field = "";  // with out_of_range: which field
    Message message{};

    bool ok() const noexcept { return error == DecodeError::none; }
    // One line for logs, e.g. "out_of_range (admission_request.streams)".
    std::string describe() const;
};

// The payload size of `type`, or 0 for a value that is not a MessageType.
std::size_t payload_size(MessageType type) noexcept;

// Validates and decodes the bytes of one slot (or fewer, for a short read).
DecodeResult decode(std::span<const std::byte> bytes) noexcept;
inline DecodeResult decode(const MessageSlot& slot) noexcept {
    return decode(std::as_bytes(std::span(&slot, 1)));
}

template <class P>
MessageSlot encode(const P& payload, std::uint32_t generation, std::uint64_t correlation = 0) noexcept {
    static_assert(sizeof(P) <= kMaxPayloadBytes, "payload does not fit in a slot");
    static_assert(std::is_trivially_copyable_v<P>);
    MessageSlot slot{};
    slot.header.type = static_cast<std::uint16_t>(P::kType);
    slot.header.version = kMessageVersion;
    slot.header.payload_size = sizeof(P);
    slot.header.generation = generation;
    slot.header.correlation = correlation;
    std::memcpy(slot.payload.data(), &payload, sizeof(P));
    return slot;
}

}  // namespace comfy
