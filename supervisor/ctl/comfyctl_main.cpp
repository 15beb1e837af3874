// comfyctl: prints a supervisor's participants or census from its segment, as a table or
// JSON. Exit status 0 when printed, 1 when the segment could not be read, 2 for a bad
// command line; every failure is one line on stderr.
#include "supervisor/ctl/ctl_options.hpp"
#include "supervisor/ctl/report_format.hpp"
#include "supervisor/ctl/report_json.hpp"
#include "supervisor/ctl/report_text.hpp"
#include "supervisor/ctl/segment_report.hpp"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace {

using namespace comfy;

// One line on stderr, whatever the message holds.
void complain(std::string message) {
    std::replace(message.begin(), message.end(), '\n', ' ');
    std::fprintf(stderr, "comfyctl: %s\n", message.c_str());
}

std::string render(const ctl::Options& options, const ctl::SegmentReport& report) {
    switch (options.command) {
        case ctl::Command::workers:
            return options.json ? ctl::workers_json(report).dump(2) + "\n" : ctl::workers_text(report, ctl::wall_clock_ms());
        case ctl::Command::ledger:
            return options.json ? ctl::ledger_json(report).dump(2) + "\n" : ctl::ledger_text(report);
        default:
            return options.json ? ctl::census_json(report).dump(2) + "\n" : ctl::census_text(report);
    }
}

// Operator requests travel as signals: the segment is the supervisor's to write, and
// attach has just checked that its creator is the live supervisor.
std::string ask_supervisor(ctl::Command command, pid_t supervisor) {
    const bool free = command == ctl::Command::free;
    if (::kill(supervisor, free ? SIGUSR1 : SIGHUP) != 0) {
        throw std::runtime_error("cannot signal supervisor pid " + std::to_string(supervisor) + ": " +
                                 std::strerror(errno) + "; run comfyctl as the supervisor's user");
    }
    return std::string("asked supervisor pid ") + std::to_string(supervisor) +
           (free ? " for a full release of every worker\n" : " to restart its failed packs\n");
}

int run(const std::vector<std::string>& args) {
    ctl::Options options;
    try {
        options = ctl::parse_options(args);
    } catch (const ctl::UsageError& error) {
        complain(std::string(error.what()) + "; " + ctl::usage_line());
        return 2;
    }
    if (options.help) {
        std::fputs(ctl::help_text().c_str(), stdout);
        return 0;
    }
    std::string output;
    try {
        const auto segment = attach_segment(options.instance);
        if (options.command == ctl::Command::free || options.command == ctl::Command::retry) {
            output = ask_supervisor(options.command, segment.header().creator_pid);
        } else {
            output = render(options, ctl::read_report(options.instance, segment));
        }
    } catch (const ipc::SegmentError& error) {
        complain(error.what());
        return 1;
    } catch (const std::exception& error) {
        complain(std::string("reading instance '") + options.instance + "' failed: " + error.what() +
                 "; the segment may be damaged: restart the supervisor");
        return 1;
    }
    if (std::fputs(output.c_str(), stdout) < 0 || std::fflush(stdout) != 0) {
        complain("writing the output failed; check where stdout goes");
        return 1;
    }
    return 0;
}

}  // namespace

int main(int argc, char* argv[]) {
    try {
        return run(std::vector<std::string>(argv + 1, argv + argc));
    } catch (const std::exception& error) {
        complain(error.what());
        return 1;
    }
}
