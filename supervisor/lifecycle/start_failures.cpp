#include "supervisor/lifecycle/start_failures.hpp"

#include "shared/json_errors.hpp"
#include "supervisor/config/environment_problem.hpp"

#include <unistd.h>

#include <cerrno>
#include <fstream>

namespace comfy::supervisor {

namespace {

// How the config names what the pack runs, for the fix.
std::string command_role(const PackConfig& pack) {
    if (!pack.python) return "command";
    return pack.python->environment.empty() ? "interpreter" : "environment's interpreter";
}

// What to do about a command that cannot run as this user.
std::string command_fix(const PackConfig& pack) {
    if (pack.python && !pack.python->environment.empty()) return "run " + pack.python->build_command + " to rebuild it";
    return "put it back, or name another " + command_role(pack) + " in the config";
}

// The interpreter a script's first line names ("#!/usr/bin/env python3" gives /usr/bin/env);
// empty for a file that names none.
std::string interpreter_line(const std::string& file) {
    std::ifstream script(file);
    std::string line;
    if (!std::getline(script, line) || !line.starts_with("#!")) return {};
    const auto start = line.find_first_not_of(" \t", 2);
    if (start == std::string::npos) return {};
    return line.substr(start, line.find_first_of(" \t", start) - start);
}

// An exec of `command` that failed with `error`, in words with the fix.
std::string exec_text(const PackConfig& pack, int error) {
    const std::string& command = pack.command;
    const std::string what = "cannot execute its " + command_role(pack) + " " + command + ": " + system_message(error);
    if (error == ENOENT && ::access(command.c_str(), F_OK) == 0) {
        // The file is there: what is not is the interpreter its first line names.
        const std::string named = interpreter_line(command);
        if (!named.empty()) {
            return what + " (its first line names " + named + ", which is not there); install it, or name an "
                   "interpreter that is there on that line";
        }
    }
    if (error == EACCES) {
        return what + " (as user " + this_user() + "); make it executable by that user (chmod a+rx), or " +
               command_fix(pack);
    }
    if (error == ENOEXEC) return what + " (it is not a program this machine runs, nor a script with a #! line); " + command_fix(pack);
    return what + "; " + command_fix(pack);
}

}  // namespace

std::optional<std::string> start_problem(const PackConfig& pack) {
    if (pack.python && !pack.python->environment.empty()) {
        auto environment = environment_state(pack);
        if (environment.fault != EnvironmentFault::none) return std::move(environment.line);
    }
    // Seen here rather than in the exec: a sandboxed pack's exec is bwrap's, which would
    // only exit 1 and be taken for a crash.
    // Not permitted is left to the exec, which judges it as the child will run (root may
    // execute what access() refuses).
    if (::access(pack.command.c_str(), X_OK) != 0) {
        if (const int error = errno; error != EACCES) return exec_text(pack, error);
    }
    return std::nullopt;
}

std::string start_failure_text(const PackConfig& pack, const StartFailure& failure) {
    switch (failure.step) {
        case StartFailure::Step::none: return {};
        case StartFailure::Step::setup: return "its process could not be set up: " + system_message(failure.error);
        case StartFailure::Step::working_directory:
            return "cannot enter its working directory " + pack.working_directory + ": " +
                   system_message(failure.error) + "; make it, or name another in the config's working_directory";
        case StartFailure::Step::exec: return exec_text(pack, failure.error);
    }
    return {};
}

bool start_failure_lasts(const StartFailure& failure) {
    if (failure.step != StartFailure::Step::exec && failure.step != StartFailure::Step::working_directory) return false;
    switch (failure.error) {
        case ENOENT:
        case ENOTDIR:
        case EACCES:
        case ENOEXEC:
        case ELOOP: return true;
        default: return false;
    }
}

}  // namespace comfy::supervisor
