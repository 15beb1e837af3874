#include "tests/soak/soak_options.hpp"

#include <charconv>

namespace comfy::soak {

namespace {

template <class Number>
Number number_of(const std::string& flag, const std::string& text, Number low, Number high) {
    Number value{};
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc{} || end != text.data() + text.size() || value < low || value > high) {
        throw UsageError(flag + " expects a whole number from " + std::to_string(low) + " to " + std::to_string(high) +
                         ", found '" + text + "'");
    }
    return value;
}

}  // namespace

const char* soak_usage() noexcept { return "usage: comfy-soak [--seconds N] [--seed S] [--json] [--keep-logs]"; }

SoakOptions parse_soak_options(const std::vector<std::string>& args) {
    SoakOptions options;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& flag = args[i];
        if (flag == "--help" || flag == "-h") {
            options.help = true;
        } else if (flag == "--json") {
            options.json = true;
        } else if (flag == "--keep-logs") {
            options.keep_logs = true;
        } else if (flag == "--seconds" || flag == "--seed") {
            if (i + 1 >= args.size()) throw UsageError(flag + " needs a value");
            const std::string& value = args[++i];
            if (flag == "--seconds") {
                options.seconds = number_of<unsigned>(flag, value, 10, 86400);
            } else {
                options.seed = number_of<std::uint64_t>(flag, value, 0, UINT64_MAX);
            }
        } else {
            throw UsageError("unknown option '" + flag + "'");
        }
    }
    return options;
}

}  // namespace comfy::soak
