#pragma once
// The parsers of a config file's sections, one file each, which config.cpp calls in the
// file's order. Each is given its section as a Node and reports any problem in it through
// the ConfigReader (config_reader.hpp); what one section needs of another (the capacities
// under /limits, whether there is a host) it is given as an argument. Private to
// supervisor/config/.

#include "supervisor/config/config.hpp"
#include "supervisor/config/config_reader.hpp"

namespace comfy::supervisor::config_loader {

// /device (device_section.cpp)
DeviceConfig read_device(const ConfigReader& reader, const Node& node);

// /limits (limits_section.cpp)
Limits read_limits(const ConfigReader& reader, const Node& node);

// /memory and /host, device memory and host RAM (memory_section.cpp); a ledger quota is
// checked against the ledger's rows.
MemoryConfig read_memory(const ConfigReader& reader, const Node& node, const Capacities& capacities);
HostMemoryConfig read_host(const ConfigReader& reader, const Node& node);

// /http (http_section.cpp)
HttpConfig read_http(const ConfigReader& reader, const Node& node);

}  // namespace comfy::supervisor::config_loader
