// Reads /http: the address and port of the operator's HTTP endpoints, off when there is
// none. The address is checked as inet_pton reads it, so that a typo is refused at load
// and not found only when the supervisor binds.

#include "supervisor/config/sections.hpp"

#include <arpa/inet.h>

#include <charconv>
#include <system_error>

namespace comfy::supervisor::config_loader {

HttpConfig read_http(const ConfigReader& reader, const Node& node) {
    reader.expect_object(node, {"listen"});
    HttpConfig http;
    const auto listen = member(node, "listen");
    if (!listen) return http;
    constexpr const char* kExpected = "an address and port such as \"127.0.0.1:8189\" or \"[::1]:8189\"";
    const std::string text = reader.read_string(*listen, kExpected);
    const auto colon = text.rfind(':');
    if (colon == std::string::npos) reader.fail(listen->at, kExpected, describe_json_value(listen->value));
    std::string address = text.substr(0, colon);
    if (address.size() >= 2 && address.front() == '[' && address.back() == ']') address = address.substr(1, address.size() - 2);
    unsigned long port = 0;
    const std::string port_text = text.substr(colon + 1);
    const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    in6_addr probe{};
    const bool address_ok = ::inet_pton(AF_INET, address.c_str(), &probe) == 1 ||
                            ::inet_pton(AF_INET6, address.c_str(), &probe) == 1;
    if (!address_ok || port_text.empty() || ec != std::errc{} || end != port_text.data() + port_text.size() ||
        port > 65535) {
        reader.fail(listen->at, kExpected, describe_json_value(listen->value));
    }
    http.enabled = true;
    http.address = address;
    http.port = static_cast<unsigned short>(port);
    return http;
}

}  // namespace comfy::supervisor::config_loader
