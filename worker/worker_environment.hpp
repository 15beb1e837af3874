#pragma once
// What the supervisor hands a worker at spawn, through environment variables: which slot
// and generation are its own, the token that proves it, and the descriptors it inherited:
// the segment (read-only), its own region and the doorbell.
// A participant never opens any of these by name.

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace comfy::worker {

inline constexpr const char* kEnvInstance = "COMFY_SV_INSTANCE";
inline constexpr const char* kEnvSlot = "COMFY_SV_SLOT";
inline constexpr const char* kEnvGeneration = "COMFY_SV_GENERATION";
inline constexpr const char* kEnvToken = "COMFY_SV_TOKEN";
inline constexpr const char* kEnvDoorbellFd = "COMFY_SV_DOORBELL_FD";
inline constexpr const char* kEnvSegmentFd = "COMFY_SV_SEGMENT_FD";
inline constexpr const char* kEnvRegionFd = "COMFY_SV_REGION_FD";
inline constexpr const char* kEnvHeartbeatMs = "COMFY_SV_HEARTBEAT_MS";
inline constexpr const char* kEnvCudaDevice = "COMFY_SV_CUDA_DEVICE";  // absent: the simulated device
// Only for participants that bridge node calls (the ComfyUI host, and a pack run in the
// config's "python" form): this life's end of its control socket (a Unix SOCK_SEQPACKET
// socket on which the supervisor sends JSON events with descriptors attached), and for a
// pack its value arena (a sealed memfd it alone writes) with its size in bytes; the host
// gets an arena per pack life on the control socket instead.
inline constexpr const char* kEnvBridgeFd = "COMFY_SV_BRIDGE_FD";
inline constexpr const char* kEnvArenaFd = "COMFY_SV_ARENA_FD";
inline constexpr const char* kEnvArenaBytes = "COMFY_SV_ARENA_BYTES";
// The participant library built beside the supervisor, for participants that load it
// (Python, through ctypes); absent when the build has none.
inline constexpr const char* kEnvLibrary = "COMFY_SV_LIBRARY";

using Token = std::array<std::uint8_t, 32>;

struct WorkerEnvironment {
    std::string instance;
    std::uint32_t slot = 0;
    std::uint32_t generation = 0;
    Token token{};
    int doorbell_fd = -1;
    int segment_fd = -1;       // the supervisor's segment, read-only
    int region_fd = -1;        // this life's own region, writable
    std::chrono::milliseconds heartbeat_interval{500};
    int cuda_device = -1;  // the CUDA device to use, or -1 for the simulated device
    int bridge_fd = -1;    // the bridge's control socket, or -1 for a participant that does not bridge
    int arena_fd = -1;     // a pack life's value arena, writable, or -1 (the host, or no bridge)
    std::uint64_t arena_bytes = 0;

    // Reads the COMFY_SV_* variables; throws std::runtime_error with one line naming
    // the missing or malformed variable.
    static WorkerEnvironment from_process_environment();

    // The variables, for the supervisor to put into a child's environment.
    std::map<std::string, std::string> to_variables() const;
    // The descriptors the variables name, for the child to inherit.
    std::vector<int> descriptors() const;
};

std::string token_to_hex(const Token& token);

}  // namespace comfy::worker
