#include "supervisor/ops/http_guard.hpp"

#include "supervisor/ctl/control_protocol.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace comfy::supervisor {

namespace {

// "name", "name:port" or "[v6]:port", as Host and an origin carry them.
struct Authority {
    std::string name;  // lower case, without brackets
    std::optional<unsigned> port;
    bool bracketed = false;
};

std::string lower(std::string_view text) {
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
    return out;
}

std::optional<Authority> parse_authority(std::string_view text) {
    Authority authority;
    std::string_view rest;
    if (!text.empty() && text.front() == '[') {
        const auto close = text.find(']');
        if (close == std::string_view::npos) return std::nullopt;
        authority.name = lower(text.substr(1, close - 1));
        authority.bracketed = true;
        rest = text.substr(close + 1);
    } else {
        const auto colon = text.find(':');
        authority.name = lower(text.substr(0, colon));
        if (colon != std::string_view::npos) rest = text.substr(colon);
    }
    if (authority.name.empty()) return std::nullopt;
    if (rest.empty()) return authority;
    unsigned port = 0;
    const auto digits = rest.substr(1);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (rest.front() != ':' || digits.empty() || ec != std::errc{} || end != digits.data() + digits.size() ||
        port > 65535) {
        return std::nullopt;
    }
    authority.port = port;
    return authority;
}

// An IP address names a server by itself: a page can make a browser send one only when
// the page itself came from that address, so no rebinding leads to it.
bool ip_address(const Authority& host) {
    unsigned char probe[16];
    return host.bracketed ? ::inet_pton(AF_INET6, host.name.c_str(), probe) == 1
                          : ::inet_pton(AF_INET, host.name.c_str(), probe) == 1;
}

bool allowed_host(const HttpAccess& access, const Authority& host) {
    return host.name == "localhost" || ip_address(host) ||
           std::find(access.allowed_hosts.begin(), access.allowed_hosts.end(), host.name) != access.allowed_hosts.end();
}

// Whether a browser's Origin is the server that Host names. A Host without a port (a
// proxy in front that dropped it) is matched by name alone; otherwise the origin's port,
// or its scheme's, must be Host's.
bool same_origin(std::string_view origin, const Authority& host) {
    const auto scheme_end = origin.find("://");
    if (scheme_end == std::string_view::npos) return false;  // "null" among them: a sandbox or a file
    const auto scheme = lower(origin.substr(0, scheme_end));
    if (scheme != "http" && scheme != "https") return false;
    const auto parsed = parse_authority(origin.substr(scheme_end + 3));
    if (!parsed || parsed->name != host.name) return false;
    if (!host.port) return true;
    return parsed->port.value_or(scheme == "http" ? 80U : 443U) == *host.port;
}

// Compared in time that depends on the length alone, so a client cannot find the token
// a character at a time by timing the refusals.
bool same_secret(std::string_view given, std::string_view secret) {
    if (given.size() != secret.size()) return false;
    unsigned char difference = 0;
    for (std::size_t i = 0; i < secret.size(); ++i) {
        difference |= static_cast<unsigned char>(given[i] ^ secret[i]);
    }
    return difference == 0;
}

// The token of "Bearer TOKEN" (the scheme in any case), or nothing.
std::optional<std::string_view> bearer(std::string_view authorization) {
    constexpr std::string_view kScheme = "bearer ";
    if (authorization.size() <= kScheme.size() || lower(authorization.substr(0, kScheme.size())) != kScheme) {
        return std::nullopt;
    }
    auto token = authorization.substr(kScheme.size());
    while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
    return token;
}

Refused refuse(HttpRefusal reason, unsigned status, const std::string& text) {
    return {reason, text, error_response(status, text), ""};
}

std::string shown(std::string_view text) { return "\"" + ctl::printable(text, 80) + "\""; }

}  // namespace

std::optional<Refused> screen(const HttpAccess& access, const RequestHead& request) {
    if (!request.host) return refuse(HttpRefusal::host, 400, "a request needs a Host header naming this server");
    const auto host = parse_authority(*request.host);
    if (!host || !allowed_host(access, *host)) {
        return refuse(HttpRefusal::host, 403,
                      "Host " + shown(*request.host) +
                          " is not a name of this server (localhost, an IP address, or one of http.allowed_hosts); "
                          "add the name to http.allowed_hosts to use it");
    }
    if (request.fetch_site && lower(*request.fetch_site) == "cross-site") {
        return refuse(HttpRefusal::origin, 403, "a page of another site may not use this server (Sec-Fetch-Site: cross-site)");
    }
    if (request.origin && !same_origin(*request.origin, *host)) {
        return refuse(HttpRefusal::origin, 403,
                      "a page of another origin (Origin " + shown(*request.origin) +
                          ") may not use this server (Host " + shown(*request.host) + ")");
    }
    const bool reads = request.method == "GET" || request.method == "HEAD";
    if (reads || access.token.empty()) return std::nullopt;
    const auto given = request.authorization ? bearer(*request.authorization) : std::nullopt;
    if (given && same_secret(*given, access.token)) return std::nullopt;
    auto refused = refuse(HttpRefusal::token, 401,
                          given ? "the bearer token is not http.token_file's"
                                : ctl::printable(request.method, 16) +
                                      " needs the token of http.token_file: send Authorization: Bearer TOKEN");
    refused.authenticate = "Bearer realm=\"comfy-supervisor\"";
    return refused;
}

}  // namespace comfy::supervisor
