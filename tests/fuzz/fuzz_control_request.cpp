// libFuzzer target: a control socket request line (supervisor/ctl/control_protocol.hpp),
// any bytes, as any client of the supervisor's user can send. Beyond never crashing: a
// refused request's reason is one line and its answer one JSON line; an accepted one
// written back out reads as the same request.

#include "supervisor/ctl/control_protocol.hpp"
#include "tests/fuzz/fuzz_check.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace comfy::ctl;
    const std::string_view line(reinterpret_cast<const char*>(data), size);
    const auto parsed = parse_request(line);
    if (const auto* problem = std::get_if<std::string>(&parsed)) {
        comfy::fuzz::check_one_line(*problem, "");
        const std::string answer = error_line(ControlError::bad_request, *problem);
        if (answer.find('\n') + 1 != answer.size()) comfy::fuzz::broken("an answer of one line", answer);
        if (nlohmann::json::parse(answer, nullptr, false).is_discarded()) comfy::fuzz::broken("an answer in JSON", answer);
        return 0;
    }
    const auto& request = std::get<ControlRequest>(parsed);
    const std::string again = request_line(request);
    const auto reread = parse_request(std::string_view(again).substr(0, again.size() - 1));
    const auto* same = std::get_if<ControlRequest>(&reread);
    if (same == nullptr || same->op != request.op || same->pack != request.pack || same->pins != request.pins ||
        same->since != request.since || same->follow != request.follow) {
        comfy::fuzz::broken("a request written out reads back the same", again);
    }
    return 0;
}
