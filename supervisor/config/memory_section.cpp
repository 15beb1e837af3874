// Reads /memory, how the supervisor arbitrates device memory (docs/ARBITRATION.md), and
// /host, its budget of host RAM: both are memory the participants share.

#include "shared/message_payloads.hpp"
#include "supervisor/config/sections.hpp"

namespace comfy::supervisor::config_loader {

namespace {

// --reserve-vram takes any amount; more than a device's worth is a typo.
constexpr Range kReserveBytes{0, kMaxBytes};
constexpr Range kMemoryTimeoutMs{1, 3'600'000};
constexpr Range kHostBytes{0, kMaxBytes};
constexpr Range kIdleReleaseMs{0, 86'400'000};  // 0: no idle sweep

// A quota above the ledger's rows would be no quota at all: most likely a typo.
std::uint32_t read_ledger_quota(const ConfigReader& reader, const Node& node, const Capacities& capacities) {
    const auto rows = as_unsigned(node.value);
    if (rows && *rows >= 1 && *rows <= capacities.ledger_entries) return static_cast<std::uint32_t>(*rows);
    reader.fail(node.at,
                "a whole number of models from 1 to " + std::to_string(capacities.ledger_entries) +
                    " (/limits/ledger_entries)",
                describe_json_value(node.value));
}

}  // namespace

MemoryConfig read_memory(const ConfigReader& reader, const Node& node, const Capacities& capacities) {
    reader.expect_object(node, {"reserve_bytes", "no_fit", "wait_timeout_ms", "answer_timeout_ms", "deaf_participant",
                                "smart_memory", "ledger_quota"});
    MemoryConfig memory;
    if (const auto reserve = member(node, "reserve_bytes")) memory.reserve_bytes = reader.read_size(*reserve, kReserveBytes);
    if (const auto policy = member(node, "no_fit")) memory.no_fit = reader.read_choice(*policy, arbiter::kNoFitPolicies);
    if (const auto wait = member(node, "wait_timeout_ms")) memory.wait_timeout = reader.read_ms(*wait, kMemoryTimeoutMs);
    if (const auto answer = member(node, "answer_timeout_ms")) {
        memory.answer_timeout = reader.read_ms(*answer, kMemoryTimeoutMs);
    }
    if (const auto deaf = member(node, "deaf_participant")) {
        memory.deaf_participant = reader.read_choice(*deaf, kDeafPolicies);
    }
    if (const auto smart = member(node, "smart_memory")) memory.smart_memory = reader.read_flag(*smart);
    if (const auto quota = member(node, "ledger_quota")) {
        memory.ledger_quota = read_ledger_quota(reader, *quota, capacities);
    }
    return memory;
}

HostMemoryConfig read_host(const ConfigReader& reader, const Node& node) {
    reader.expect_object(node, {"budget_bytes", "low_water_bytes", "pin_release_interval_ms", "idle_release_ms"});
    HostMemoryConfig host;
    if (const auto budget = member(node, "budget_bytes")) host.budget_bytes = reader.read_size(*budget, kHostBytes);
    if (const auto low = member(node, "low_water_bytes")) host.low_water_bytes = reader.read_size(*low, kHostBytes);
    if (const auto interval = member(node, "pin_release_interval_ms")) {
        host.pin_release_interval = reader.read_ms(*interval, kMemoryTimeoutMs);
    }
    if (const auto idle = member(node, "idle_release_ms")) host.idle_release = reader.read_ms(*idle, kIdleReleaseMs);
    return host;
}

}  // namespace comfy::supervisor::config_loader
