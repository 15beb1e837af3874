// The message decoder: round trips, and rejection of every truncated, oversized,
// unknown, mis-versioned, mis-sized or out-of-range input; random bytes never crash it.
#include <catch2/catch.hpp>

#include "shared/message_codec.hpp"
#include "shared/segment_layout.hpp"

#include <cstring>
#include <string>
#include <random>

using namespace comfy;

namespace {

MessageType message_type(const MessageSlot& slot) { return static_cast<MessageType>(slot.header.type); }

std::span<const std::byte> bytes_of(const MessageSlot& slot, std::size_t size = sizeof(MessageSlot)) {
    return {reinterpret_cast<const std::byte*>(&slot), size};
}

template <class P>
DecodeResult round_trip(const P& payload) {
    return decode(encode(payload, 3, 77));
}

// A valid value of every payload type, to mutate one field at a time.
AdmissionRequest good_admission() {
    AdmissionRequest m{};
    m.device = 0;
    m.streams = 2;
    m.bytes = 4ull << 30;
    m.largest_tensor = 256ull << 20;
    m.pinned_bytes = 0;
    m.keep_loaded_count = 2;
    return m;
}

AdmissionKeep good_keep() {
    AdmissionKeep m{};
    m.count = 2;
    m.keys[0] = machine_model_key(3, 11);
    m.keys[1] = 12;
    return m;
}

template <class P>
std::string rejected_field(const P& payload) {
    const auto result = round_trip(payload);
    REQUIRE(result.error == DecodeError::out_of_range);
    return result.field;
}

}  // namespace

TEST_CASE("every message type survives a round trip") {
    // Default-constructed payloads are valid for types without required fields; the
    // rest get the smallest valid value.
    Payload samples[] = {
        Hello{1234, kLayoutVersion, kCapPinnedMemory, {}},
        HelloAck{3, 1, 400ull << 20, 24ull << 30},
        Shutdown{5000, 0},
        ModelRegistered{1, 1, 1000, kUnknownBytes, 0, 1, 0, 0},
        ResidencyReceipt{1, 5, 500, 1, 1, 1, {}},
        ModelDropped{1},
        good_admission(),
        AdmissionGrant{1, 2, 0, 3, 0},
        AdmissionRefused{10, 5, 5, 0, 0},
        PartialUnload{1, 100},
        Detach{1},
        UnloadReceipt{1, 100, 50, 7, 450, 0, {}},
        ReleaseNodeBoundary{1, 2, 0},
        CastEpochBoundary{9},
        FullRelease{1, 0},
        PartialRelease{100},
        ReleasePins{100},
        ReleaseReceipt{static_cast<std::uint16_t>(MessageType::release_pins), 0, {}, 100, 100},
        PinRequest{100},
        PinGrant{100, 200},
        NodeStarted{1, 2, 0},
        NodeFinished{1, 2, 0},
        WorkRequest{1, 2, 0, "load_model"},
        WorkResult{1, 2, 0, 100},
        RequestFailed{0, -1, 9, 2},
        good_keep(),
        StandInUnload{1, 1, 7, 1 << 20, 0, {}},
        StandInResult{7, 1 << 20, 3 << 20, 0, 0},
        DeviceAllocate{1 << 30},
        DeviceAllocation{1, {}},
        DeviceRelease{1 << 30},
        Ready{0, 0},
    };
    for (const auto& sample : samples) {
        std::visit(
            [&](const auto& payload) {
                const auto result = round_trip(payload);
                INFO(to_string(payload.kType));
                REQUIRE(result.ok());
                CHECK(result.message.type() == payload.kType);
                CHECK(result.message.header.generation == 3);
                CHECK(result.message.header.correlation == 77);
                using P = std::decay_t<decltype(payload)>;
                REQUIRE(std::holds_alternative<P>(result.message.payload));
                CHECK(std::memcmp(&std::get<P>(result.message.payload), &payload, sizeof(P)) == 0);
            },
            sample);
    }
}

TEST_CASE("inputs shorter than a header or than their payload are truncated") {
    const auto slot = encode(good_admission(), 1);
    CHECK(decode(bytes_of(slot, 0)).error == DecodeError::truncated);
    CHECK(decode(bytes_of(slot, sizeof(MessageHeader) - 1)).error == DecodeError::truncated);
    CHECK(decode(bytes_of(slot, sizeof(MessageHeader) + sizeof(AdmissionRequest) - 1)).error ==
          DecodeError::truncated);
    CHECK(decode(bytes_of(slot, sizeof(MessageHeader) + sizeof(AdmissionRequest))).ok());
}

TEST_CASE("inputs larger than a slot, or claiming a larger payload, are oversized") {
    std::byte big[sizeof(MessageSlot) + 1]{};
    CHECK(decode(std::span<const std::byte>(big, sizeof big)).error == DecodeError::oversized);

    auto slot = encode(Detach{1}, 1);
    slot.header.payload_size = kMaxPayloadBytes + 1;
    CHECK(decode(slot).error == DecodeError::oversized);
    slot.header.payload_size = 0xFFFFFFFF;
    CHECK(decode(slot).error == DecodeError::oversized);
}

TEST_CASE("unknown types and other versions are rejected") {
    auto slot = encode(Detach{1}, 1);
    for (const std::uint16_t type : {std::uint16_t{0}, std::uint16_t(kLastMessageType + 1), std::uint16_t{0xFFFF}}) {
        slot.header.type = type;
        CHECK(decode(slot).error == DecodeError::unknown_type);
    }
    slot = encode(Detach{1}, 1);
    slot.header.version = kMessageVersion + 1;
    CHECK(decode(slot).error == DecodeError::bad_version);
}

TEST_CASE("a payload size other than the type's is rejected for every type") {
    for (std::uint16_t type = kFirstMessageType; type <= kLastMessageType; ++type) {
        MessageSlot slot{};
        slot.header.type = type;
        slot.header.version = kMessageVersion;
        slot.header.payload_size = 1;  // smaller than any payload
        INFO(to_string(static_cast<MessageType>(type)));
        CHECK(decode(slot).error == DecodeError::wrong_size);
    }
}

TEST_CASE("out-of-range fields are rejected with the field named") {
    CHECK(rejected_field(Hello{0, kLayoutVersion, 0, {}}) == "hello.pid");
    CHECK(rejected_field(Hello{1, kLayoutVersion, 1ull << 40, {}}) == "hello.capabilities");
    CHECK(rejected_field(HelloAck{1, 0, 0, 0}) == "hello_ack.generation");
    CHECK(rejected_field(Shutdown{kMaxGraceMs + 1, 0}) == "shutdown.grace_ms");
    CHECK(rejected_field(ModelRegistered{0, 1, 10, 10, 0, 0, 0, 0}) == "model_registered.model_id");
    CHECK(rejected_field(ModelRegistered{1, 1, kMaxBytes + 1, 10, 0, 0, 0, 0}) == "model_registered.total_bytes");
    CHECK(rejected_field(ModelRegistered{1, 1, 10, kMaxBytes + 1, 0, 0, 0, 0}) == "model_registered.loaded_bytes");
    CHECK(rejected_field(ModelRegistered{1, 1, 10, 10, kMaxDevices, 0, 0, 0}) == "model_registered.device");
    CHECK(rejected_field(ModelRegistered{1, 1, 10, 10, 0, kModelKindCount, 0, 0}) == "model_registered.kind");
    CHECK(rejected_field(ModelRegistered{1, 1, 10, 10, 0, 0, 2, 0}) == "model_registered.dynamic");
    CHECK(rejected_field(ResidencyReceipt{1, 1, 1, 1, 2, 0, {}}) == "residency_receipt.currently_used");
    CHECK(rejected_field(ResidencyReceipt{1, 1, 1, 1, 1, 2, {}}) == "residency_receipt.just_used");
    CHECK(rejected_field(ModelDropped{0}) == "model_dropped.model_id");

    auto admission = good_admission();
    admission.streams = 0;
    CHECK(rejected_field(admission) == "admission_request.streams");
    admission.streams = kMaxStreams + 1;
    CHECK(rejected_field(admission) == "admission_request.streams");
    admission = good_admission();
    admission.bytes = kUnknownBytes;
    CHECK(rejected_field(admission) == "admission_request.bytes");

    CHECK(rejected_field(AdmissionGrant{1, 1, 0, kVramStateCount, 0}) == "admission_grant.vram_state");
    CHECK(rejected_field(AdmissionRefused{1, 1, 1, kRefusalReasonCount, 0}) == "admission_refused.reason");
    CHECK(rejected_field(UnloadReceipt{1, 10, 10, 1, 0, 2, {}}) == "unload_receipt.deferred");
    CHECK(rejected_field(UnloadReceipt{1, 10, 10, 1, 0, 1, {}}) == "unload_receipt.bytes_freed");
    CHECK(rejected_field(UnloadReceipt{1, 10, 10, 1, kMaxBytes + 1, 0, {}}) == "unload_receipt.loaded_bytes");

    auto keep = good_keep();
    keep.count = 0;
    CHECK(rejected_field(keep) == "admission_keep.count");
    keep.count = kKeepKeysPerMessage + 1;
    CHECK(rejected_field(keep) == "admission_keep.count");
    keep = good_keep();
    keep.keys[1] = machine_model_key(2, 0);  // a slot without a model
    CHECK(rejected_field(keep) == "admission_keep.keys");
    keep = good_keep();
    keep.keys[5] = 9;  // past the count: must be zero
    CHECK(rejected_field(keep) == "admission_keep.keys");
    CHECK(rejected_field(StandInUnload{1, 1, 7, 0, 0, {}}) == "standin_unload.bytes");     // frees nothing
    CHECK(rejected_field(StandInUnload{1, 1, 7, 100, 1, {}}) == "standin_unload.bytes");   // a detach frees all
    CHECK(rejected_field(StandInUnload{1, 0, 7, 0, 1, {}}) == "standin_unload.owner_generation");
    CHECK(rejected_field(StandInUnload{1, 1, kModelIdLimit, 0, 1, {}}) == "standin_unload.model_id");
    CHECK(rejected_field(StandInResult{7, 0, 0, kStandInOutcomeCount, 0}) == "standin_result.outcome");
    CHECK(rejected_field(DeviceAllocate{kMaxBytes + 1}) == "device_allocate.bytes");
    CHECK(rejected_field(DeviceAllocation{2, {}}) == "device_allocation.granted");
    CHECK(rejected_field(DeviceAllocation{1, {1}}) == "device_allocation.reserved");
    CHECK(rejected_field(DeviceRelease{kMaxBytes + 1}) == "device_release.bytes");
    CHECK(rejected_field(Ready{0, 1}) == "ready.reserved");
    CHECK(rejected_field(FullRelease{kFullReleaseReasonCount, 0}) == "full_release.reason");
    CHECK(rejected_field(ReleaseReceipt{static_cast<std::uint16_t>(MessageType::detach), 0, {}, 1, 1}) ==
          "release_receipt.release_type");
    CHECK(rejected_field(NodeStarted{1, 1, 2}) == "node_started.activity");
    CHECK(rejected_field(NodeFinished{1, 1, kWorkStatusCount}) == "node_finished.status");
    CHECK(rejected_field(RequestFailed{kFailureReasonCount, 0, 0, 0}) == "request_failed.reason");
    CHECK(rejected_field(RequestFailed{0, 0, 65, 0}) == "request_failed.signal");

    WorkRequest unterminated{1, 1, 0, {}};
    std::memset(unterminated.node_name, 'a', sizeof unterminated.node_name);
    CHECK(rejected_field(unterminated) == "work_request.node_name");
    CHECK(rejected_field(WorkRequest{1, 1, 0, {}}) == "work_request.node_name");
    CHECK(rejected_field(WorkRequest{1, 1, 0, "bad\nname"}) == "work_request.node_name");
    WorkRequest trailing{1, 1, 0, "ok"};
    trailing.node_name[10] = 'x';
    CHECK(rejected_field(trailing) == "work_request.node_name");

    auto slot = encode(Detach{1}, 1);
    slot.header.reserved = 1;
    const auto result = decode(slot);
    CHECK(result.error == DecodeError::out_of_range);
    CHECK(std::string(result.field) == "header.reserved");
    CHECK(result.describe() == "out_of_range (header.reserved)");
}

TEST_CASE("a model's name from another process is printable, ended and zero after its end, or refused") {
    ModelRegistered named{1, 1, 10, 10, 0, 0, 0, 0, "SDXL (sd_xl_base_1.0.safetensors)"};
    const auto result = round_trip(named);
    REQUIRE(result.ok());
    CHECK(name_in(std::get<ModelRegistered>(result.message.payload).name) == "SDXL (sd_xl_base_1.0.safetensors)");
    CHECK(round_trip(ModelRegistered{1, 1, 10, 10, 0, 0, 0, 0}).ok());  // a model without a name

    ModelRegistered unterminated = named;
    std::memset(unterminated.name, 'a', sizeof unterminated.name);
    CHECK(rejected_field(unterminated) == "model_registered.name");
    CHECK(rejected_field(ModelRegistered{1, 1, 10, 10, 0, 0, 0, 0, "bad\x1b[2Jname"}) == "model_registered.name");
    CHECK(rejected_field(ModelRegistered{1, 1, 10, 10, 0, 0, 0, 0, "caf\xc3\xa9"}) == "model_registered.name");
    ModelRegistered trailing = named;
    trailing.name[kModelNameBytes - 1] = 'x';  // past the NUL: a writer leaves zeros there
    CHECK(rejected_field(trailing) == "model_registered.name");
}

TEST_CASE("a writer's name is cut to its field and made printable") {
    char field[kModelNameBytes];
    set_name(field, std::string(100, 'n'));
    CHECK(is_valid_name(field));
    CHECK(name_in(field) == std::string(kModelNameBytes - 1, 'n'));
    set_name(field, "tab\there\ncaf\xc3\xa9");
    CHECK(is_valid_name(field));
    CHECK(name_in(field) == "tab?here?caf??");
    set_name(field, "");
    CHECK(is_valid_name(field));
    CHECK(name_in(field).empty());
    char small[4];
    set_name(small, "abcdef");
    CHECK(name_in(small) == "abc");
}

TEST_CASE("a million random inputs never crash the decoder") {
    std::mt19937_64 random(20261129);
    std::size_t accepted = 0;
    std::size_t reached_payload_checks = 0;
    for (int i = 0; i < 1'000'000; ++i) {
        MessageSlot slot;
        auto* words = reinterpret_cast<std::uint64_t*>(&slot);
        for (std::size_t w = 0; w < sizeof slot / 8; ++w) words[w] = random();
        // Half the time make the header plausible, so the payload checks get exercised.
        if (i % 2 == 0) {
            slot.header.type = static_cast<std::uint16_t>(kFirstMessageType + random() % kLastMessageType);
            slot.header.version = kMessageVersion;
            slot.header.reserved = 0;
            // Mostly the type's own payload size, sometimes any size a slot could claim.
            slot.header.payload_size = (random() % 4 != 0)
                                           ? static_cast<std::uint32_t>(payload_size(message_type(slot)))
                                           : static_cast<std::uint32_t>(random() % (kMaxPayloadBytes + 1));
        }
        const std::size_t length = (i % 7 == 0) ? random() % (sizeof slot + 1) : sizeof slot;
        const auto result = decode(bytes_of(slot, length));
        if (result.ok()) ++accepted;
        if (result.error == DecodeError::out_of_range || result.ok()) ++reached_payload_checks;
    }
    CHECK(reached_payload_checks > 100'000);
    CHECK(accepted < 1'000'000);
}
