// Reads /limits: the timeouts of a worker's life (handshake, the host's handshake, ready,
// heartbeat, shutdown), how
// many requests one participant may have waiting, and the shared segment's capacities.

#include "shared/message_payloads.hpp"
#include "supervisor/config/sections.hpp"

#include <limits>

namespace comfy::supervisor::config_loader {

namespace {

constexpr Range kHeartbeatTimeoutMs{100, 3'600'000};
constexpr Range kHandshakeTimeoutMs{100, 600'000};
// ComfyUI's start imports torch and every custom node it loads itself, which may install
// what they need: up to an hour, as a pack's import.
constexpr Range kHostHandshakeTimeoutMs{100, 3'600'000};
// A pack's import may install or download what it needs: up to an hour.
constexpr Range kReadyTimeoutMs{100, 3'600'000};
constexpr Range kShutdownGraceMs{0, kMaxGraceMs};  // the most a Shutdown message can carry
// A participant waits for each answer; more than a few at once is a runaway loop.
constexpr Range kOutstandingRequests{1, 4096};
// Only the type's range: Capacities::validate() owns the real limits.
constexpr Range kCapacityField{0, std::numeric_limits<std::uint32_t>::max()};

struct CapacityField {
    const char* key;
    std::uint32_t Capacities::*field;
};
constexpr CapacityField kCapacityFields[] = {
    {"participants", &Capacities::participants},
    {"ledger_entries", &Capacities::ledger_entries},
    {"ring_slots", &Capacities::ring_slots},
};

// Capacities::validate() checks each field on its own and names the first bad one in
// prose; validating each field against otherwise default (valid) capacities tells
// which JSON path to blame.
Capacities read_capacities(const ConfigReader& reader, const Node& limits) {
    Capacities capacities;
    for (const auto& [key, field] : kCapacityFields) {
        const auto node = member(limits, key);
        if (!node) continue;
        Capacities probe;
        probe.*field = static_cast<std::uint32_t>(reader.read_unsigned(*node, kCapacityField));
        if (const auto problem = probe.validate(); !problem.empty()) {
            reader.fail(node->at, "a value the shared segment accepts (" + problem + ")", describe_json_value(node->value));
        }
        capacities.*field = probe.*field;
    }
    return capacities;
}

}  // namespace

Limits read_limits(const ConfigReader& reader, const Node& node) {
    reader.expect_object(node, {"heartbeat_timeout_ms", "handshake_timeout_ms", "host_handshake_timeout_ms",
                                "ready_timeout_ms", "shutdown_grace_ms", "outstanding_requests", "participants",
                                "ledger_entries", "ring_slots"});
    Limits limits;
    if (const auto heartbeat = member(node, "heartbeat_timeout_ms")) {
        limits.heartbeat_timeout = reader.read_ms(*heartbeat, kHeartbeatTimeoutMs);
    }
    if (const auto handshake = member(node, "handshake_timeout_ms")) {
        limits.handshake_timeout = reader.read_ms(*handshake, kHandshakeTimeoutMs);
    }
    if (const auto handshake = member(node, "host_handshake_timeout_ms")) {
        limits.host_handshake_timeout = reader.read_ms(*handshake, kHostHandshakeTimeoutMs);
    }
    if (const auto ready = member(node, "ready_timeout_ms")) {
        limits.ready_timeout = reader.read_ms(*ready, kReadyTimeoutMs);
    }
    if (const auto grace = member(node, "shutdown_grace_ms")) limits.shutdown_grace = reader.read_ms(*grace, kShutdownGraceMs);
    if (const auto outstanding = member(node, "outstanding_requests")) {
        limits.outstanding_requests = static_cast<std::uint32_t>(reader.read_unsigned(*outstanding, kOutstandingRequests));
    }
    limits.capacities = read_capacities(reader, node);
    return limits;
}

}  // namespace comfy::supervisor::config_loader
