#pragma once
// How often each bound of the operator's surface turned a client away, by reason: the
// HTTP endpoints' (comfy_http_refused_total) and the control socket's
// (comfy_control_refused_total). Every bound that refuses counts here, so an operator
// sees a client that keeps hitting one (docs/METRICS.md). Counted and read on the
// supervisor's loop.

#include <array>
#include <cstddef>
#include <cstdint>

namespace comfy::supervisor {

enum class HttpRefusal : std::uint8_t {
    connections,         // past the cap of open connections: 503
    client_connections,  // past one client's share of them: 429
    header_timeout,      // no whole request head in time: closed
    body_timeout,        // no whole body in time after the head: closed
    too_large,           // a head or a body past its limit: 431, 413
    host,                // a Host that names no name of this server (or none): 403 (400)
    origin,              // a web page of another origin or site: 403
    token,               // a request that changes something without the token: 401
};
inline constexpr std::array<const char*, 8> kHttpRefusalNames{
    "connections", "client_connections", "header_timeout", "body_timeout", "too_large", "host", "origin", "token"};

enum class ControlRefusal : std::uint8_t {
    connections,         // past the cap of open connections
    client_connections,  // past one process's share of them
    timeout,             // connected and sent no whole request in time
    too_large,           // a request line past its limit
    uid,                 // a peer of another user
    slow_follower,       // an events follower that stopped reading, let go
};
inline constexpr std::array<const char*, 6> kControlRefusalNames{
    "connections", "client_connections", "timeout", "too_large", "uid", "slow_follower"};

struct Refusals {
    std::array<std::uint64_t, kHttpRefusalNames.size()> http{};
    std::array<std::uint64_t, kControlRefusalNames.size()> control{};

    void count(HttpRefusal reason) noexcept { ++http[static_cast<std::size_t>(reason)]; }
    void count(ControlRefusal reason) noexcept { ++control[static_cast<std::size_t>(reason)]; }
};

inline const char* refusal_name(HttpRefusal reason) noexcept { return kHttpRefusalNames[static_cast<std::size_t>(reason)]; }
inline const char* refusal_name(ControlRefusal reason) noexcept {
    return kControlRefusalNames[static_cast<std::size_t>(reason)];
}

}  // namespace comfy::supervisor
