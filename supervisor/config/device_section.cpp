// Reads /device: which device the supervisor arbitrates, a simulated one of a given size
// or a CUDA device by index, and what to do when that CUDA device is not there.

#include "shared/message_payloads.hpp"
#include "supervisor/config/sections.hpp"

namespace comfy::supervisor::config_loader {

namespace {

constexpr Range kCudaIndex{0, kMaxDevices - 1};
// No model fits below 256 MiB; above kMaxBytes the figure is a typo, not a device.
constexpr Range kSimulatedDeviceBytes{std::uint64_t{256} << 20, kMaxBytes};

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
    if (const auto kind = member(node, "kind")) device.kind = reader.read_choice(*kind, kDeviceKinds);
    // A key of the other kind would be ignored; better to say so than to surprise.
    if (device.kind == DeviceKind::simulated) {
        reader.expect_object(node, {"kind", "total_bytes"}, " (for a \"simulated\" device)");
        if (const auto size = member(node, "total_bytes")) device.total_bytes = reader.read_size(*size, kSimulatedDeviceBytes);
    } else {
        reader.expect_object(node, {"kind", "index", "fallback"}, " (for a \"cuda\" device)");
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
