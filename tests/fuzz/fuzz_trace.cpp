// libFuzzer target: trace replay on any text, the header, event and decision parsers and
// the arbiter behind them. Beyond never crashing, replay ends with one of its three
// statuses, and says why in one line ("line N: ...") when it is not 0.

#include "supervisor/arbiter/trace.hpp"
#include "tests/fuzz/fuzz_check.hpp"

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace comfy::arbiter;
    std::istringstream trace(std::string(reinterpret_cast<const char*>(data), size));
    std::ostream decisions(nullptr);  // replayed decisions are made and dropped
    std::ostringstream errors;
    const int status = replay(trace, decisions, errors);
    std::string message = errors.str();
    if (status == kReplayAgreed) {
        if (!message.empty()) comfy::fuzz::broken("nothing said when replay agrees", message);
        return 0;
    }
    if (status != kReplayDiffered && status != kTraceMalformed) comfy::fuzz::broken("a status of 0, 1 or 2", message);
    if (message.empty() || message.back() != '\n') comfy::fuzz::broken("a message ending its line", message);
    message.pop_back();
    comfy::fuzz::check_one_line(message, "line ");
    return 0;
}
