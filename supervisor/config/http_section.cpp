// Reads /http: the address and port of the operator's HTTP endpoints (off when there is
// none), the host names a request may name besides localhost and IP addresses, and the
// token a request that changes something must bear. The address is checked as inet_pton
// reads it, so that a typo is refused at load and not found only when the supervisor
// binds. Listening beyond loopback without a token is refused: every machine that can
// reach the port could otherwise unload every model (docs/SECURITY.md, "HTTP").

#include "supervisor/config/sections.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <system_error>

namespace comfy::supervisor::config_loader {

namespace {

// 127.0.0.0/8, ::1, and 127.0.0.0/8 mapped into IPv6: only this machine can connect.
bool loopback(const std::string& address) {
    in_addr v4{};
    if (::inet_pton(AF_INET, address.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
    in6_addr v6{};
    if (::inet_pton(AF_INET6, address.c_str(), &v6) != 1) return false;
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
}

// A DNS name as a browser sends it in Host (RFC 1123 letters, digits, hyphens and dots),
// lower-cased: Host is compared without regard to case.
std::vector<std::string> read_host_names(const ConfigReader& reader, const Node& node) {
    constexpr const char* kExpected = "a host name such as \"gpu-box.example.com\", without a port or scheme";
    if (!node.value.is_array()) reader.fail(node.at, "a list of host names", describe_json_value(node.value));
    std::vector<std::string> names;
    for (std::size_t index = 0; index < node.value.size(); ++index) {
        const Node entry{node.value[index], node.at / index};
        std::string name = reader.read_string(entry, kExpected);
        const bool valid = !name.empty() && name.size() <= 253 && name.front() != '-' && name.front() != '.' &&
                           std::all_of(name.begin(), name.end(), [](unsigned char c) {
                               return std::isalnum(c) || c == '-' || c == '.';
                           });
        if (!valid) reader.fail(entry.at, kExpected, describe_json_value(entry.value));
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
        names.push_back(std::move(name));
    }
    return names;
}

}  // namespace

HttpConfig read_http(const ConfigReader& reader, const Node& node) {
    reader.expect_object(node, {"listen", "allowed_hosts", "token_file"});
    HttpConfig http;
    if (const auto hosts = member(node, "allowed_hosts")) http.allowed_hosts = read_host_names(reader, *hosts);
    if (const auto token = member(node, "token_file")) http.token = read_token_file(reader, *token);
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
    if (http.token.empty() && !loopback(address)) {
        reader.fail(listen->at,
                    "a loopback address such as \"127.0.0.1:8189\", or http.token_file beside it (the token every "
                    "POST /free must then bear)",
                    describe_json_value(listen->value) + " (reachable from other machines, with no token)");
    }
    http.enabled = true;
    http.address = address;
    http.port = static_cast<unsigned short>(port);
    return http;
}

}  // namespace comfy::supervisor::config_loader
