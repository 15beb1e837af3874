#include "supervisor/ctl/control_protocol.hpp"

#include "shared/message_payloads.hpp"
#include "shared/records.hpp"

#include <array>
#include <set>

namespace comfy::ctl {

namespace {

using Json = nlohmann::json;

constexpr std::array<std::pair<Op, const char*>, 8> kOps{{{Op::free, "free"},
                                                          {Op::retry, "retry"},
                                                          {Op::restart, "restart"},
                                                          {Op::stop, "stop"},
                                                          {Op::start, "start"},
                                                          {Op::release, "release"},
                                                          {Op::events, "events"},
                                                          {Op::info, "info"}}};

constexpr std::array<std::pair<ControlError, const char*>, 4> kErrors{{{ControlError::bad_request, "bad_request"},
                                                                       {ControlError::unknown_pack, "unknown_pack"},
                                                                       {ControlError::refused, "refused"},
                                                                       {ControlError::not_permitted, "not_permitted"}}};

const char* op_name(Op op) {
    for (const auto& [value, name] : kOps) {
        if (value == op) return name;
    }
    return "?";
}

bool names_a_pack(Op op) { return op == Op::restart || op == Op::stop || op == Op::start || op == Op::release; }

// The fields each op may carry, "op" included.
std::set<std::string> fields_of(Op op) {
    if (op == Op::release) return {"op", "pack", "pins"};
    if (op == Op::events) return {"op", "since", "follow", "failures"};
    if (op == Op::retry) return {"op", "pack"};
    if (names_a_pack(op)) return {"op", "pack"};
    return {"op"};
}

std::string check_fields(const Json& request, ControlRequest& out) {
    const auto allowed = fields_of(out.op);
    for (const auto& [key, value] : request.items()) {
        if (!allowed.count(key)) return "'" + std::string(op_name(out.op)) + "' takes no field '" + printable(key) + "'";
    }
    if (names_a_pack(out.op) || (out.op == Op::retry && request.contains("pack"))) {
        const auto pack = request.find("pack");
        if (pack == request.end() || !pack->is_string()) return "'pack' must be a string";
        out.pack = pack->get<std::string>();
        if (out.pack.empty() || out.pack.size() >= kPackNameBytes) {
            return "'pack' must have 1 to " + std::to_string(kPackNameBytes - 1) + " characters";
        }
    }
    if (const auto pins = request.find("pins"); pins != request.end()) {
        if (!pins->is_number_unsigned() || pins->get<std::uint64_t>() == 0 || pins->get<std::uint64_t>() > kMaxBytes) {
            return "'pins' must be a whole number of bytes from 1 to " + std::to_string(kMaxBytes);
        }
        out.pins = pins->get<std::uint64_t>();
    }
    if (const auto since = request.find("since"); since != request.end()) {
        if (!since->is_number_unsigned()) return "'since' must be a whole number";
        out.since = since->get<std::uint64_t>();
    }
    for (const auto& [name, flag] : {std::pair{"follow", &out.follow}, std::pair{"failures", &out.failures}}) {
        if (const auto value = request.find(name); value != request.end()) {
            if (!value->is_boolean()) return "'" + std::string(name) + "' must be true or false";
            *flag = value->get<bool>();
        }
    }
    return {};
}

}  // namespace

const char* error_name(ControlError error) noexcept {
    for (const auto& [value, name] : kErrors) {
        if (value == error) return name;
    }
    return "?";
}

std::optional<ControlError> error_named(std::string_view name) noexcept {
    for (const auto& [value, known] : kErrors) {
        if (name == known) return value;
    }
    return std::nullopt;
}

std::string request_line(const ControlRequest& request) {
    Json out = {{"op", op_name(request.op)}};
    if (names_a_pack(request.op) || (request.op == Op::retry && !request.pack.empty())) out["pack"] = request.pack;
    if (request.pins) out["pins"] = *request.pins;
    if (request.op == Op::events) {
        out["since"] = request.since;
        out["follow"] = request.follow;
        out["failures"] = request.failures;
    }
    return out.dump() + "\n";
}

std::string printable(std::string_view text, std::size_t limit) {
    std::string shown(text.substr(0, limit));
    for (char& c : shown) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    }
    return shown;
}

std::variant<ControlRequest, std::string> parse_request(std::string_view line) {
    if (line.size() >= kMaxRequestBytes) return "a request has at most " + std::to_string(kMaxRequestBytes) + " bytes";
    const Json request = Json::parse(line, nullptr, false);
    if (request.is_discarded() || !request.is_object()) return std::string("a request is one JSON object on one line");
    const auto op = request.find("op");
    if (op == request.end() || !op->is_string()) return std::string("a request needs an 'op' string");
    ControlRequest out;
    const std::string name = op->get<std::string>();
    bool known = false;
    for (const auto& [value, op_text] : kOps) {
        if (name == op_text) {
            out.op = value;
            known = true;
        }
    }
    if (!known) return "unknown op '" + printable(name) + "'";
    if (auto problem = check_fields(request, out); !problem.empty()) return problem;
    return out;
}

std::string json_line(const nlohmann::json& value) {
    // A pack's output can reach an event's text: bytes that are not UTF-8 are replaced, not thrown on.
    return value.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string ok_line(const std::string& message) { return answer_line(std::nullopt, message, Json::object()); }

std::string error_line(ControlError error, const std::string& message) {
    return answer_line(error, message, Json::object());
}

std::string answer_line(std::optional<ControlError> error, const std::string& message, const nlohmann::json& fields) {
    Json answer = fields.is_object() ? fields : Json::object();
    answer["ok"] = !error;
    if (error) answer["error"] = error_name(*error);
    answer["message"] = message;
    return json_line(answer);
}

}  // namespace comfy::ctl
