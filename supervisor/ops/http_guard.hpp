#pragma once
// Which requests the HTTP endpoints answer at all, decided before any route, apart from
// the connection (docs/SECURITY.md, "HTTP"). A browser on the operator's machine is the
// danger: any page it shows may send requests to the supervisor's address.
//   Host    must name this server: "localhost", an IP address, or a name of
//           http.allowed_hosts. A page that rebinds its own name to this machine's address
//           (DNS rebinding) sends its own name, so it reads nothing.
//   Origin  when a browser sends one, must be the server Host names, as ComfyUI's own
//           server requires (its origin-only middleware): a page of another origin may send
//           a POST that needs no preflight (text/plain), and it is refused before anything
//           is done. "Sec-Fetch-Site: cross-site" is refused likewise.
//   Token   a request other than GET or HEAD must bear http.token_file's token
//           ("Authorization: Bearer TOKEN") when one is configured, as it must be beyond
//           loopback (the config refuses otherwise).

#include "supervisor/ops/ops_routes.hpp"
#include "supervisor/ops/refusals.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace comfy::supervisor {

struct HttpAccess {
    std::vector<std::string> allowed_hosts;  // lower case
    std::string token;                       // empty: none
};

// The parts of a request the guard reads; a header that is absent is nothing.
struct RequestHead {
    std::string_view method;
    std::string_view target;
    std::optional<std::string_view> host;
    std::optional<std::string_view> origin;
    std::optional<std::string_view> fetch_site;  // Sec-Fetch-Site
    std::optional<std::string_view> authorization;
};

struct Refused {
    HttpRefusal reason;
    std::string text;    // one line: what was wrong and what to change
    OpsResponse answer;  // the text as the JSON error
    // A 401's WWW-Authenticate, which it must have (RFC 9110): the scheme to use.
    std::string authenticate;
};

// Nothing when the request may be answered; otherwise the answer that refuses it, its
// one-line error saying what to change.
std::optional<Refused> screen(const HttpAccess& access, const RequestHead& request);

}  // namespace comfy::supervisor
