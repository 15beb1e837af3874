#include "supervisor/config/environment_problem.hpp"

#include "shared/json_errors.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

namespace comfy::supervisor {

namespace {

namespace fs = std::filesystem;

// A user's name, or "uid N" for one the system has no name for.
std::string user_name(uid_t uid) {
    const passwd* entry = ::getpwuid(uid);
    return entry != nullptr ? std::string(entry->pw_name) : "uid " + std::to_string(uid);
}

// The first folder from the root down to `path` that this user cannot enter, which makes
// everything below it unreachable (stat answers EACCES); `path` itself when none.
fs::path first_closed_folder(const fs::path& path) {
    fs::path folder;
    for (const auto& part : path.parent_path()) {
        folder /= part;
        if (::access(folder.c_str(), X_OK) != 0) return folder;
    }
    return path;
}

class Diagnosis {
public:
    explicit Diagnosis(const PackConfig& pack)
        : python_(*pack.python), folder_(python_.environment),
          what_("pack " + pack.name + "'s environment " + python_.environment) {}

    EnvironmentState run() const {
        struct stat status {};
        if (::stat(folder_.c_str(), &status) != 0) {
            if (errno == EACCES) return unreadable(first_closed_folder(folder_), "it cannot enter that folder");
            return build(EnvironmentFault::missing, "is missing");
        }
        if (!S_ISDIR(status.st_mode)) return build(EnvironmentFault::missing, "is not a folder");
        if (::access(folder_.c_str(), R_OK | X_OK) != 0) return unreadable(folder_, system_message(errno));
        const fs::path lock = folder_ / kEnvironmentLock;
        if (::stat(lock.c_str(), &status) != 0) {
            if (errno == EACCES) return unreadable(lock, system_message(errno));
            return build(EnvironmentFault::unfinished,
                         "is unfinished (no " + std::string(kEnvironmentLock) + ": comfyctl pack add did not end)");
        }
        if (::access(lock.c_str(), R_OK) != 0) return unreadable(lock, system_message(errno));
        return interpreter();
    }

private:
    EnvironmentState interpreter() const {
        const fs::path python = folder_ / "bin" / "python";
        if (::access(python.c_str(), X_OK) == 0) return {};
        const int error = errno;
        if (error == EACCES) return unreadable(python, "it cannot execute it");
        // A venv's python is a link to the Python it was made from: name what it points to.
        std::error_code unused;
        const fs::path target = fs::read_symlink(python, unused);
        const std::string link = target.empty() ? std::string() : ", a link to " + target.string();
        return build(EnvironmentFault::no_interpreter,
                     "has no interpreter (bin/python: " + system_message(error) + link + ")");
    }

    EnvironmentState build(EnvironmentFault fault, const std::string& found) const {
        const char* verb = fault == EnvironmentFault::missing ? "build" : "rebuild";
        return {fault, what_ + " " + found + ": run " + python_.build_command + " to " + verb + " it"};
    }

    // `path` (the environment, its lock or interpreter, or a folder above it) refused this
    // user: named with whose it is and its mode, which say why, and what opens it.
    EnvironmentState unreadable(const fs::path& path, const std::string& why) const {
        struct stat status {};
        std::string owner = "its owner";
        std::string whose;
        if (::stat(path.c_str(), &status) == 0) {
            owner = user_name(status.st_uid);
            char mode[8];
            std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(status.st_mode & 07777));
            whose = ", " + owner + "'s, mode " + mode;
        }
        return {EnvironmentFault::unreadable,
                what_ + " cannot be read by user " + this_user() + ", as whom the supervisor runs (" + path.string() +
                    whose + ": " + why + "): run " + python_.build_command + " again as " + owner +
                    ", which makes it readable to every user, or chmod -R a+rX " + python_.environment};
    }

    const PythonPack& python_;
    fs::path folder_;
    std::string what_;
};

}  // namespace

EnvironmentState environment_state(const PackConfig& pack) { return Diagnosis(pack).run(); }

std::string this_user() { return user_name(::geteuid()) + " (uid " + std::to_string(::geteuid()) + ")"; }

}  // namespace comfy::supervisor
