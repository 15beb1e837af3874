#pragma once
// The programs' command lines, through Boost.Program_options, read one way everywhere:
// long options as `--name VALUE` or `--name=VALUE`, short ones as `-x VALUE`, no
// abbreviations, `--` before an argument that starts with a dash; every problem one line
// in our words; every program and subcommand with --help, -h and --version.

#include <boost/program_options.hpp>

#include <stdexcept>
#include <string>
#include <vector>

namespace comfy::cli {

namespace po = boost::program_options;

// A command line that cannot be run; what() is one line naming the problem.
class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Adds --help/-h and --version to `options`.
void add_help_and_version(po::options_description& options);

// Parses `args` (what follows the program's name, or its subcommand's) against `options`;
// the positional arguments go, in order, to the option named `positional` when given
// (none are accepted otherwise). Throws UsageError.
po::variables_map parse(const std::vector<std::string>& args, const po::options_description& options,
                        const char* positional = nullptr);

// "PROGRAM VERSION", e.g. "comfyctl 0.1.0", from the project's version.
std::string version_line(const std::string& program);

// The option's value when given, else `fallback`.
std::string value_or(const po::variables_map& values, const char* name, const std::string& fallback);

}  // namespace comfy::cli
