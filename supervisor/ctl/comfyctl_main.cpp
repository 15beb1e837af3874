// comfyctl: prints a supervisor's participants, census or ledger from its segment (a table
// or JSON), shows them live (top), asks the supervisor for actions and its events over
// its control socket, and runs the Python tool for pack, env and adopt (python_tool.hpp). Exit statuses:
// ctl_options.cpp's help. Every failure is one line on stderr.
#include "supervisor/ctl/control_client.hpp"
#include "supervisor/ctl/ctl_options.hpp"
#include "supervisor/ctl/events_text.hpp"
#include "supervisor/ctl/instance_owner.hpp"
#include "supervisor/ctl/python_tool.hpp"
#include "supervisor/ctl/report_format.hpp"
#include "supervisor/ctl/report_json.hpp"
#include "supervisor/ctl/report_text.hpp"
#include "supervisor/ctl/segment_report.hpp"
#include "supervisor/ctl/top_command.hpp"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace {

using namespace comfy;

// How long an action's answer may take: the supervisor answers from its event loop at once.
constexpr std::chrono::seconds kAnswerWait{5};

// One line on stderr, whatever the message holds.
void complain(std::string message) {
    std::replace(message.begin(), message.end(), '\n', ' ');
    std::fprintf(stderr, "comfyctl: %s\n", message.c_str());
}

bool print(const std::string& text) {
    if (std::fputs(text.c_str(), stdout) < 0 || std::fflush(stdout) != 0) {
        complain("writing the output failed; check where stdout goes");
        return false;
    }
    return true;
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

ctl::ControlRequest request_of(const ctl::Options& options) {
    ctl::ControlRequest request;
    switch (options.command) {
        case ctl::Command::free: request.op = ctl::Op::free; break;
        case ctl::Command::retry: request.op = ctl::Op::retry; break;
        case ctl::Command::restart: request.op = ctl::Op::restart; break;
        case ctl::Command::stop: request.op = ctl::Op::stop; break;
        case ctl::Command::start: request.op = ctl::Op::start; break;
        case ctl::Command::release: request.op = ctl::Op::release; break;
        default: request.op = ctl::Op::events; break;
    }
    request.pack = options.pack;
    request.pins = options.pins;
    request.follow = options.follow;
    request.failures = options.failures;
    return request;
}

// The exit status for a refusal: the command line's fault (2) or the situation's (1).
int status_of_refusal(const nlohmann::json& answer) {
    const auto error = ctl::error_named(answer.value("error", std::string()));
    return error == ctl::ControlError::bad_request || error == ctl::ControlError::unknown_pack ? 2 : 1;
}

volatile sig_atomic_t g_interrupted = 0;

int follow_events(ctl::ControlClient& client, const ctl::Options& options) {
    // Ctrl-C ends a follow with status 0: it is how one stops following.
    struct sigaction stop {};
    stop.sa_handler = [](int) { g_interrupted = 1; };
    ::sigaction(SIGINT, &stop, nullptr);
    ::sigaction(SIGTERM, &stop, nullptr);
    if (!options.json && !print(ctl::events_heading())) return 1;
    while (g_interrupted == 0) {
        const auto line = client.read_line(std::nullopt);
        if (!line) break;
        const auto event = nlohmann::json::parse(*line, nullptr, false);
        if (event.is_discarded() || !event.is_object()) throw ctl::ControlUnreachable("the supervisor sent what is not an event");
        if (event.contains("ok")) {  // a follower let go for falling behind says so
            complain(event.value("message", std::string("the supervisor ended the events")));
            return 1;
        }
        if (!print(options.json ? *line + "\n" : ctl::event_text(event))) return 1;
    }
    return 0;
}

int ask_supervisor(const ctl::Options& options) {
    ctl::ControlClient client(options.instance);
    client.send(request_of(options));
    const auto answer = client.answer(kAnswerWait);
    const std::string message = answer.value("message", std::string());
    if (!answer["ok"].get<bool>()) {
        complain(message.empty() ? std::string("the supervisor refused") : message);
        return status_of_refusal(answer);
    }
    if (options.command == ctl::Command::events) return follow_events(client, options);
    return print(message + "\n") ? 0 : 1;
}

int run(const std::vector<std::string>& args) {
    ctl::Options options;
    try {
        options = ctl::parse_options(args);
    } catch (const ctl::UsageError& error) {
        complain(error.what());
        return 2;
    }
    if (options.help) return print(ctl::help_text(options)) ? 0 : 1;
    if (options.version) return print(cli::version_line("comfyctl") + "\n") ? 0 : 1;
    if (ctl::runs_python_tool(options.command)) {
        std::string problem;
        ctl::exec_python_tool(ctl::command_name(options.command), options.tool_args, problem);  // returns only when the tool could not start
        complain(problem);
        return 1;
    }
    try {
        switch (options.command) {
            case ctl::Command::workers:
            case ctl::Command::census:
            case ctl::Command::ledger: {
                const auto segment = ctl::attach_instance(options.instance);
                const auto report = ctl::read_report(options.instance, segment);
                if (segment.outdated()) {
                    complain("segment " + segment.name() + " was truncated or replaced while it was read (by "
                             "another process of this user); run comfyctl again");
                    return 1;
                }
                return print(render(options, report)) ? 0 : 1;
            }
            case ctl::Command::top: return ctl::run_top(options.instance);
            default: return ask_supervisor(options);
        }
    } catch (const ipc::SegmentError& error) {
        complain(error.what());
        return 1;
    } catch (const ctl::ControlUnreachable& error) {
        complain(error.what());
        return 1;
    } catch (const std::exception& error) {
        complain(std::string("reading instance '") + options.instance + "' failed: " + error.what() +
                 "; the segment may be damaged: restart the supervisor");
        return 1;
    }
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
