#pragma once
// The control socket's protocol (docs/SECURITY.md, "The control socket"): one request per
// connection, one JSON object on one line; then one answer line, {"ok": true, "message":
// ...} or {"ok": false, "error": KIND, "message": ...}. `events` answers {"ok": true,
// "last_seq": N} and then one line per event, and ends the connection unless it follows.
//
//   {"op": "free"} | {"op": "retry"[, "pack": NAME]}
//   {"op": "restart" | "stop" | "start", "pack": NAME}
//   {"op": "release", "pack": NAME[, "pins": BYTES]}
//   {"op": "events"[, "since": SEQ][, "follow": true][, "failures": true]}
//   {"op": "info"}   answered with the reserve and the version, for comfyctl top
//
// Both ends validate: a request is at most kMaxRequestBytes, its fields known and of their
// types, its name a pack name's length; anything else is answered bad_request.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace comfy::ctl {

inline constexpr std::size_t kMaxRequestBytes = 4096;  // the newline included
// What a client takes as one answer line; events carry a log line and their figures.
inline constexpr std::size_t kMaxAnswerLineBytes = 64 * 1024;

enum class Op { free, retry, restart, stop, start, release, events, info };

struct ControlRequest {
    Op op = Op::free;
    std::string pack;                   // restart, stop, start, release; retry's when not empty
    std::optional<std::uint64_t> pins;  // release: release_pins of this many bytes instead of a full release
    std::uint64_t since = 0;            // events: those numbered after this
    bool follow = false;                // events: then new ones as they happen
    bool failures = false;              // events: the warnings and errors alone, kept apart and longer
};

// Why an action was not done; comfyctl exits 2 for bad_request and unknown_pack, 1 otherwise.
enum class ControlError { bad_request, unknown_pack, refused, not_permitted };
const char* error_name(ControlError error) noexcept;
std::optional<ControlError> error_named(std::string_view name) noexcept;

// The request as one line, its newline included.
std::string request_line(const ControlRequest& request);
// `text` as a line may show what a client sent: at most `limit` bytes, control characters
// as '?', so that no request can make an answer or a log line of more than one line.
std::string printable(std::string_view text, std::size_t limit = 40);
// One request line (its newline removed): the request, or why it is refused.
std::variant<ControlRequest, std::string> parse_request(std::string_view line);

// Answer lines, newline included.
std::string json_line(const nlohmann::json& value);
std::string ok_line(const std::string& message);
std::string error_line(ControlError error, const std::string& message);
// Either of them, with `fields` added to the object.
std::string answer_line(std::optional<ControlError> error, const std::string& message, const nlohmann::json& fields);

}  // namespace comfy::ctl
