#include "shared/command_line.hpp"

#include "comfy/version.hpp"

namespace comfy::cli {

namespace {

// Boost's default style, less abbreviations (`--conf` would quietly mean `--config`) and
// sticky short options (no program here has two short flags to stick together).
constexpr int kStyle = po::command_line_style::allow_short | po::command_line_style::short_allow_adjacent |
                       po::command_line_style::short_allow_next | po::command_line_style::allow_long |
                       po::command_line_style::long_allow_adjacent | po::command_line_style::long_allow_next |
                       po::command_line_style::allow_dash_for_short;

// "--instance needs a NAME": the value's name as the help shows it.
std::string needs_value(const po::options_description& options, const std::string& option) {
    const std::string bare = option.substr(option.find_first_not_of('-'));
    const auto* described = options.find_nothrow(bare, false);
    const std::string what = described ? described->semantic()->name() : std::string("value");
    return option + " needs a " + (what.empty() || what == "arg" ? std::string("value") : what);
}

}  // namespace

void add_help_and_version(po::options_description& options) {
    options.add_options()("help,h", "print this help and exit")("version", "print the version and exit");
}

po::variables_map parse(const std::vector<std::string>& args, const po::options_description& options,
                        const char* positional) {
    // Positional arguments are always collected, so that a stray one is named.
    constexpr const char* kStray = "stray-arguments";
    po::options_description all;
    all.add(options);
    if (positional == nullptr) all.add_options()(kStray, po::value<std::vector<std::string>>());
    po::positional_options_description rest;
    rest.add(positional != nullptr ? positional : kStray, -1);
    po::variables_map values;
    try {
        po::store(po::command_line_parser(args).options(all).positional(rest).style(kStyle).run(), values);
        po::notify(values);
    } catch (const po::unknown_option& error) {
        throw UsageError("unknown option '" + error.get_option_name() + "'");
    } catch (const po::invalid_command_line_syntax& error) {
        switch (error.kind()) {
            case po::invalid_command_line_syntax::missing_parameter:
            case po::invalid_command_line_syntax::empty_adjacent_parameter:  // --instance=
                throw UsageError(needs_value(options, error.get_option_name()));
            case po::invalid_command_line_syntax::extra_parameter:
                throw UsageError(error.get_option_name() + " takes no value");
            default: throw UsageError(error.what());
        }
    } catch (const po::multiple_occurrences& error) {
        throw UsageError(error.get_option_name() + " given more than once");
    } catch (const po::error& error) {
        throw UsageError(error.what());
    }
    if (values.count(kStray)) {
        throw UsageError("unexpected argument '" + values[kStray].as<std::vector<std::string>>().front() + "'");
    }
    return values;
}

std::string version_line(const std::string& program) { return program + " " + kVersion; }

std::string value_or(const po::variables_map& values, const char* name, const std::string& fallback) {
    return values.count(name) ? values[name].as<std::string>() : fallback;
}

}  // namespace comfy::cli
