#include "tests/soak/soak_options.hpp"

#include <charconv>
#include <sstream>

namespace comfy::soak {

namespace {

namespace po = cli::po;

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

std::string help_text(const po::options_description& options) {
    std::ostringstream out;
    out << soak_usage() << "\n\n"
        << "Runs the demo's supervisor, packs and prompts under faults injected at random from a\n"
           "printed seed, checking as it goes (docs/RELIABILITY.md). SIGINT or SIGTERM ends it\n"
           "early, with its report.\n"
        << options
        << "\nexit status:\n"
           "  0   no breach\n"
           "  1   a breach (each is in the report)\n"
           "  2   bad command line, or the soak could not run (said in one line, with the seed)\n";
    return out.str();
}

}  // namespace

const char* soak_usage() noexcept { return "usage: comfy-soak [--seconds N] [--seed S] [--json] [--keep-logs]"; }

SoakOptions parse_soak_options(const std::vector<std::string>& args) {
    po::options_description options("options");
    // Numbers are read as text and checked here, so that a bad one is named with its range.
    options.add_options()("seconds", po::value<std::string>()->value_name("N"), "how long to run (10 to 86400; 60)")(
        "seed", po::value<std::string>()->value_name("S"), "the faults' seed (drawn at random when not given)")(
        "json", po::bool_switch(), "the report as one JSON object")(
        "keep-logs", po::bool_switch(), "keep the supervisors' logs even when nothing broke");
    cli::add_help_and_version(options);
    const auto values = cli::parse(args, options);
    SoakOptions soak;
    if (values.count("help")) {
        soak.print = help_text(options);
        return soak;
    }
    if (values.count("version")) {
        soak.print = cli::version_line("comfy-soak") + "\n";
        return soak;
    }
    soak.json = values["json"].as<bool>();
    soak.keep_logs = values["keep-logs"].as<bool>();
    if (values.count("seconds")) soak.seconds = number_of<unsigned>("--seconds", values["seconds"].as<std::string>(), 10, 86400);
    if (values.count("seed")) {
        soak.seed = number_of<std::uint64_t>("--seed", values["seed"].as<std::string>(), 0, UINT64_MAX);
    }
    return soak;
}

}  // namespace comfy::soak
