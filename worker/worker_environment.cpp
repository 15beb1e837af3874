#include "worker/worker_environment.hpp"

#include <charconv>
#include <cstdlib>

namespace comfy::worker {

namespace {

std::string required(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') {
        throw std::runtime_error(std::string("environment variable ") + name +
                                 " is not set: a participant must be started by comfy-supervisor");
    }
    return value;
}

template <class T>
T number(const char* name) {
    const std::string text = required(name);
    T value{};
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size()) {
        throw std::runtime_error(std::string("environment variable ") + name + " is '" + text +
                                 "', expected a whole number");
    }
    return value;
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

}  // namespace

std::string token_to_hex(const Token& token) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string hex;
    for (const auto byte : token) {
        hex += kDigits[byte >> 4];
        hex += kDigits[byte & 15];
    }
    return hex;
}

WorkerEnvironment WorkerEnvironment::from_process_environment() {
    WorkerEnvironment env;
    env.instance = required(kEnvInstance);
    env.slot = number<std::uint32_t>(kEnvSlot);
    env.generation = number<std::uint32_t>(kEnvGeneration);
    env.doorbell_fd = number<int>(kEnvDoorbellFd);
    env.segment_fd = number<int>(kEnvSegmentFd);
    env.region_fd = number<int>(kEnvRegionFd);
    env.heartbeat_interval = std::chrono::milliseconds(number<std::uint32_t>(kEnvHeartbeatMs));
    if (std::getenv(kEnvCudaDevice) != nullptr) env.cuda_device = number<int>(kEnvCudaDevice);
    if (std::getenv(kEnvBridgeFd) != nullptr) env.bridge_fd = number<int>(kEnvBridgeFd);
    if (std::getenv(kEnvArenaFd) != nullptr) {
        env.arena_fd = number<int>(kEnvArenaFd);
        env.arena_bytes = number<std::uint64_t>(kEnvArenaBytes);
    }
    const std::string hex = required(kEnvToken);
    if (hex.size() != env.token.size() * 2) {
        throw std::runtime_error(std::string("environment variable ") + kEnvToken + " must hold 64 hex digits");
    }
    for (std::size_t i = 0; i < env.token.size(); ++i) {
        const int high = hex_digit(hex[2 * i]);
        const int low = hex_digit(hex[2 * i + 1]);
        if (high < 0 || low < 0) {
            throw std::runtime_error(std::string("environment variable ") + kEnvToken + " must hold 64 hex digits");
        }
        env.token[i] = static_cast<std::uint8_t>(high * 16 + low);
    }
    return env;
}

std::map<std::string, std::string> WorkerEnvironment::to_variables() const {
    std::map<std::string, std::string> variables{
        {kEnvInstance, instance},
        {kEnvSlot, std::to_string(slot)},
        {kEnvGeneration, std::to_string(generation)},
        {kEnvToken, token_to_hex(token)},
        {kEnvDoorbellFd, std::to_string(doorbell_fd)},
        {kEnvSegmentFd, std::to_string(segment_fd)},
        {kEnvRegionFd, std::to_string(region_fd)},
        {kEnvHeartbeatMs, std::to_string(heartbeat_interval.count())},
    };
    if (cuda_device >= 0) variables[kEnvCudaDevice] = std::to_string(cuda_device);
    if (bridge_fd >= 0) variables[kEnvBridgeFd] = std::to_string(bridge_fd);
    if (arena_fd >= 0) {
        variables[kEnvArenaFd] = std::to_string(arena_fd);
        variables[kEnvArenaBytes] = std::to_string(arena_bytes);
    }
    return variables;
}

std::vector<int> WorkerEnvironment::descriptors() const {
    std::vector<int> fds;
    for (const int fd : {doorbell_fd, segment_fd, region_fd, bridge_fd, arena_fd}) {
        if (fd >= 0) fds.push_back(fd);
    }
    return fds;
}

}  // namespace comfy::worker
