// libFuzzer target: the message decoder on any bytes. Beyond never crashing, a message it
// accepts encodes back to the same payload bytes and decodes again.

#include "shared/message_codec.hpp"
#include "tests/fuzz/fuzz_check.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace comfy;
    const DecodeResult result = decode(std::as_bytes(std::span(data, size)));
    if (!result.ok()) {
        if (result.describe().empty()) fuzz::broken("a refusal that says why", "");
        return 0;
    }
    const MessageHeader& header = result.message.header;
    const MessageSlot slot = std::visit(
        [&](const auto& payload) { return encode(payload, header.generation, header.correlation); },
        result.message.payload);
    const DecodeResult again = decode(slot);
    if (!again.ok() || again.message.type() != result.message.type()) {
        fuzz::broken("an accepted message decodes again after encoding", again.describe());
    }
    if (slot.header.payload_size != header.payload_size ||
        std::memcmp(slot.payload.data(), data + sizeof(MessageHeader), header.payload_size) != 0) {
        fuzz::broken("an accepted message encodes to the payload it came from", to_string(result.message.type()));
    }
    return 0;
}
