#include "supervisor/ctl/python_tool.hpp"

#include "supervisor/config/install_layout.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace comfy::ctl {

namespace {

constexpr const char* kToolPythonVariable = "COMFY_SV_TOOL_PYTHON";
constexpr const char* kToolModule = "comfy_supervisor.tools";
// The supervisor the tool's import check runs (`comfy-supervisor check`, which starts the
// pack's worker as a real start would): the one beside this comfyctl, as they are built and
// installed together (environments/import_check.py).
constexpr const char* kSupervisorVariable = "COMFY_SV_SUPERVISOR";

// comfy-supervisor in this program's own folder, or empty when it is not there.
std::string supervisor_beside_us() {
    std::error_code error;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", error);
    if (error) return {};
    const auto supervisor = exe.parent_path() / "comfy-supervisor";
    return std::filesystem::is_regular_file(supervisor, error) ? supervisor.string() : std::string();
}

}  // namespace

void exec_python_tool(const std::string& command, const std::vector<std::string>& args, std::string& problem) {
    const char* chosen = std::getenv(kToolPythonVariable);
    const bool from_variable = chosen != nullptr && *chosen != '\0';
    const std::string python = from_variable ? chosen : "python3";
    // Ours first, as a Python pack's worker has it; whatever the user's PYTHONPATH adds after.
    std::string path = supervisor::python_package_dir();
    if (const char* theirs = std::getenv("PYTHONPATH"); theirs != nullptr && *theirs != '\0') {
        path += ":" + std::string(theirs);
    }
    if (::setenv("PYTHONPATH", path.c_str(), 1) != 0) {
        problem = "cannot set PYTHONPATH for comfyctl " + command + ": " + std::strerror(errno);
        return;
    }
    if (const std::string supervisor = supervisor_beside_us();
        !supervisor.empty() && ::setenv(kSupervisorVariable, supervisor.c_str(), 1) != 0) {
        problem = std::string("cannot set ") + kSupervisorVariable + " for comfyctl " + command + ": " +
                  std::strerror(errno);
        return;
    }
    std::vector<std::string> words{python, "-m", kToolModule, command};
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& word : words) argv.push_back(word.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    const int error = errno;
    if (from_variable) {
        problem = std::string("cannot run ") + kToolPythonVariable + "=" + python + " (" + std::strerror(error) +
                  "); name a Python 3.11 or newer there, or unset it to use python3 from PATH";
    } else if (error == ENOENT) {
        problem = "comfyctl " + command + " needs python3 (3.11 or newer) on PATH and there is none; install it (Debian: "
                  "apt install python3 python3-yaml) or name one in " + std::string(kToolPythonVariable);
    } else {
        problem = "cannot run python3 for comfyctl " + command + ": " + std::string(std::strerror(error)) +
                  "; name another interpreter in " + kToolPythonVariable;
    }
}

}  // namespace comfy::ctl
