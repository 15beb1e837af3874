#include "supervisor/bridge/bridge_messages.hpp"

#include <nlohmann/json.hpp>

namespace comfy::supervisor::bridge {

namespace {

// Ordered, so that "event" comes first when a person reads one.
using json = nlohmann::ordered_json;

// Invalid UTF-8 (a reason quoting a path, say) is replaced rather than thrown on.
std::string text(const json& message) {
    return message.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::string packs(const std::vector<PackState>& packs, const BrowserLimits& browser) {
    json list = json::array();
    for (const auto& pack : packs) {
        list.push_back({{"name", pack.name},
                        {"state", pack.state},
                        {"folders", pack.folders},
                        {"cancel_grace_ms", pack.cancel_grace_ms}});
    }
    return text({{"event", "packs"},
                 {"packs", std::move(list)},
                 {"browser_messages",
                  {{"max_bytes", browser.max_bytes},
                   {"per_second", browser.per_second},
                   {"bytes_per_second", browser.bytes_per_second}}}});
}

std::string pack_started(const std::string& pack, std::uint32_t generation) {
    return text({{"event", "pack_started"}, {"pack", pack}, {"generation", generation}});
}

std::string host_started(std::uint32_t generation) {
    return text({{"event", "host_started"}, {"generation", generation}});
}

std::string pack_exited(const std::string& pack, std::uint32_t generation, int status, int signal,
                        const std::string& reason, bool restarts) {
    return text({{"event", "pack_exited"},
                 {"pack", pack},
                 {"generation", generation},
                 {"status", status},
                 {"signal", signal},
                 {"reason", reason},
                 {"restarts", restarts}});
}

std::string pack_failed(const std::string& pack, const std::string& reason) {
    return text({{"event", "pack_failed"}, {"pack", pack}, {"reason", reason}});
}

}  // namespace comfy::supervisor::bridge
