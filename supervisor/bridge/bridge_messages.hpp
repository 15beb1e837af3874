#pragma once
// The events the supervisor sends on a bridge control socket: each one datagram of a
// UTF-8 JSON object whose "event" names it; descriptors, where an event carries any, are
// attached to the same datagram. The formats are the Python side's contract
// (docs/ARCHITECTURE.md, "Node calls").

#include <cstdint>
#include <string>
#include <vector>

namespace comfy::supervisor::bridge {

struct PackState {
    std::string name;
    std::string state;   // as comfyctl names it: spawning, ready, busy, draining, dead, failed
    // The config's python.pack, its folders in order: the host serves each one's web directory from it.
    std::vector<std::string> folders;
    std::uint64_t cancel_grace_ms = 0;  // the config's python.cancel_grace_ms (host_requests.hpp)
};

// What the host forwards of a pack's messages to the browser (config.hpp's
// BrowserMessageLimits, as the host's config gives them).
struct BrowserLimits {
    std::uint64_t max_bytes = 0;
    std::uint64_t per_second = 0;
    std::uint64_t bytes_per_second = 0;
};

// To the host, first after its spawn: every Python pack in config order, and the limits on
// their messages to the browser.
std::string packs(const std::vector<PackState>& packs, const BrowserLimits& browser);
// To the host, with [its end of the call channel, the pack life's arena, read-only, the
// arena the host writes for that pack life, writable].
std::string pack_started(const std::string& pack, std::uint32_t generation);
// To a pack's worker, with [its end of the call channel, the arena the host life writes
// for this pack life, read-only].
std::string host_started(std::uint32_t generation);
// To the host when a pack's worker exited: status -1 when a signal ended it, signal 0
// when it exited; `reason` in the words of the supervisor's log; `restarts`: another life
// follows (when not, pack_failed comes next, but at shutdown).
std::string pack_exited(const std::string& pack, std::uint32_t generation, int status, int signal,
                        const std::string& reason, bool restarts);
// To the host when a pack is marked failed (not restarted until an operator asks).
std::string pack_failed(const std::string& pack, const std::string& reason);

}  // namespace comfy::supervisor::bridge
