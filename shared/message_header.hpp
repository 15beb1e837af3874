#pragma once
// The frame every control message travels in: one fixed-size ring slot holding a small
// header and a typed payload. Everything here is trivially copyable and has a fixed size.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace comfy {

inline constexpr std::uint16_t kMessageVersion = 1;

// Every message type of the protocol. The direction is in the comment: P is a
// participant (the ComfyUI host or a worker), S is the supervisor.
enum class MessageType : std::uint16_t {
    hello = 1,              // P->S  first message: pid, layout version, capabilities, token
    hello_ack,              // S->P  the slot and generation are confirmed
    shutdown,               // S->P  finish, release and exit within the grace period
    model_registered,       // P->S  a model now held on a device
    residency_receipt,      // P->S  how much of a model is loaded now (sequenced)
    model_dropped,          // P->S  the model is gone from the device
    admission_request,      // P->S  about to load W bytes
    admission_grant,        // S->P  go ahead: free bytes, published reserve, VRAM state
    admission_refused,      // S->P  the load cannot fit (policy "refuse")
    partial_unload,         // S->P  free this many bytes of one model
    detach,                 // S->P  unload one model entirely
    unload_receipt,         // P->S  bytes actually freed by partial_unload or detach
    release_node_boundary,  // S->P  release what the finished node no longer needs
    cast_epoch_boundary,    // S->P  the prompt epoch changed: drop cast buffers
    full_release,           // S->P  release everything releasable (idle, operator, /free)
    partial_release,        // S->P  release up to n bytes
    release_pins,           // S->P  unpin up to n bytes of host memory
    release_receipt,        // P->S  bytes actually freed by a release message
    pin_request,            // P->S  about to pin n bytes of host memory
    pin_grant,              // S->P  the pin fits the host budget (or how much does)
    node_started,           // P->S  busy: a node began
    node_finished,          // P->S  idle: a node ended (a release boundary)
    work_request,           // S->P  run one node of a prompt
    work_result,            // P->S  the node's outcome
    request_failed,         // S->P  a request could not be served (e.g. its worker died)
    admission_keep,         // P->S  models the next admission_request keeps loaded (any number)
    standin_unload,         // P->S  the host's eviction reached a stand-in: unload its owner's model
    standin_result,         // S->P  what that unload freed, as the owner measured it
    device_allocate,        // P->S  the simulated device: may this life allocate n bytes more?
    device_allocation,      // S->P  the answer: granted or not
    device_release,         // P->S  the simulated device: this life gave n bytes back
    ready,                  // P->S  its start-up is done (after a Hello with kCapReadyLater)
};
inline constexpr std::uint16_t kFirstMessageType = static_cast<std::uint16_t>(MessageType::hello);
inline constexpr std::uint16_t kLastMessageType = static_cast<std::uint16_t>(MessageType::ready);

std::string_view to_string(MessageType type) noexcept;

// The release messages: each is answered by a release_receipt naming its type.
constexpr bool is_release(MessageType type) noexcept {
    switch (type) {
        case MessageType::release_node_boundary:
        case MessageType::cast_epoch_boundary:
        case MessageType::full_release:
        case MessageType::partial_release:
        case MessageType::release_pins: return true;
        default: return false;
    }
}

// The eviction commands: each is answered by an unload_receipt.
constexpr bool is_eviction(MessageType type) noexcept {
    return type == MessageType::partial_unload || type == MessageType::detach;
}

struct MessageHeader {
    std::uint16_t type;          // a MessageType
    std::uint16_t version;       // kMessageVersion of the sender
    std::uint32_t payload_size;  // bytes of payload that follow, exactly sizeof the payload type
    std::uint32_t generation;    // the participant generation the message belongs to
    std::uint32_t reserved;      // zero
    std::uint64_t correlation;   // pairs a reply with its request; 0 when none
};
static_assert(sizeof(MessageHeader) == 24);

inline constexpr std::size_t kMessageSlotBytes = 128;
inline constexpr std::size_t kMaxPayloadBytes = kMessageSlotBytes - sizeof(MessageHeader);

// One ring slot: what travels between processes.
struct alignas(8) MessageSlot {
    MessageHeader header;
    std::array<std::byte, kMaxPayloadBytes> payload;
};
static_assert(sizeof(MessageSlot) == kMessageSlotBytes);
static_assert(std::is_trivially_copyable_v<MessageSlot>);

}  // namespace comfy
