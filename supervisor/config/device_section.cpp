// Reads /device: which device the supervisor arbitrates, a CUDA device by index (the
// default: the real device) or a simulated one of a given size, how long the start waits
// for that CUDA device, and what to do when it is still not there.

#include "shared/message_payloads.hpp"
#include "supervisor/config/sections.hpp"

namespace comfy::supervisor::config_loader {

namespace {

constexpr Range kCudaIndex{0, kMaxDevices - 1};
// No model fits below 256 MiB; above kMaxBytes the figure is a typo, not a device.
constexpr Range kSimulatedDeviceBytes{std::uint64_t{256} << 20, kMaxBytes};
// A driver loads in seconds at boot; past an hour the device is not coming.
constexpr Range kWaitMs{0, 3'600'000};

constexpr std::pair<std::string_view, DeviceKind> kDeviceKinds[] = {
    {"simulated", DeviceKind::simulated},
    {"cuda", DeviceKind::cuda},
};
constexpr std::pair<std::string_view, CudaFallback> kCudaFallbacks[] = {
    {"simulated", CudaFallback::simulated},
    {"stop", CudaFallback::stop},
};

}  // namespace

DeviceConfig read_device(const ConfigReader& reader, const Node& node) {
    DeviceConfig device;
    reader.require_object(node);
    const auto kind = member(node, "kind");
    if (kind) device.kind = reader.read_choice(*kind, kDeviceKinds);
    // A key of the other kind would be ignored; better to say so than to surprise.
    if (device.kind == DeviceKind::simulated) {
        reader.expect_object(node, {"kind", "total_bytes"}, " (for a \"simulated\" device)");
        if (const auto size = member(node, "total_bytes")) device.total_bytes = reader.read_size(*size, kSimulatedDeviceBytes);
    } else {
        // total_bytes without a kind is a config written when simulated was the default.
        reader.expect_object(
            node, {"kind", "index", "fallback", "wait_ms"},
            kind ? " (for a \"cuda\" device)"
                 : " (for a \"cuda\" device, the default; add \"kind\": \"simulated\" for a simulated one)");
        if (const auto wait = member(node, "wait_ms")) device.wait = reader.read_ms(*wait, kWaitMs);
        if (const auto index = member(node, "index")) {
            device.cuda_index = static_cast<int>(reader.read_unsigned(*index, kCudaIndex));
        }
        if (const auto fallback = member(node, "fallback")) {
            device.cuda_fallback = reader.read_choice(*fallback, kCudaFallbacks);
        }
    }
    return device;
}

}  // namespace comfy::supervisor::config_loader
