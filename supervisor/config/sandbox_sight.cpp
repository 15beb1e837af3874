#include "supervisor/config/sandbox_sight.hpp"

#include "supervisor/config/config_reader.hpp"

#include <algorithm>
#include <system_error>

namespace comfy::supervisor {

namespace fs = std::filesystem;
using config_loader::is_within;

SandboxSight sandbox_sight(const fs::path& path) {
    for (const std::string_view own : kSandboxOwn) {
        if (is_within(fs::path(own), path) || (own == "/proc" && is_within(path, fs::path(own)))) {
            return SandboxSight::unshowable;
        }
    }
    const bool hidden = std::any_of(kSandboxOwn.begin(), kSandboxOwn.end(),
                                    [&](std::string_view own) { return is_within(path, fs::path(own)); });
    return hidden ? SandboxSight::hidden : SandboxSight::seen;
}

std::vector<fs::path> given_and_real(const fs::path& path) {
    std::vector<fs::path> both{path};
    std::error_code error;
    const fs::path real = fs::canonical(path, error);
    if (!error && real != path) both.push_back(real);
    return both;
}

std::vector<fs::path> interpreter_needs(const fs::path& interpreter) {
    std::vector<fs::path> needs;
    std::error_code error;
    for (const fs::path& folder : {interpreter.parent_path(), interpreter.parent_path().parent_path()}) {
        if (fs::is_regular_file(folder / "pyvenv.cfg", error)) {
            needs.push_back(folder);
            break;
        }
    }
    const fs::path real = fs::canonical(interpreter, error);
    if (error) return needs;
    needs.push_back(real);
    if (real.parent_path().filename() != "bin") return needs;
    for (const char* lib : {"lib", "lib64"}) {
        const fs::path folder = real.parent_path().parent_path() / lib;
        if (fs::is_directory(folder, error)) needs.push_back(folder);
    }
    return needs;
}

std::vector<fs::path> hidden_interpreter_paths(const fs::path& interpreter) {
    std::vector<fs::path> hidden;
    for (const auto& needed : interpreter_needs(interpreter)) {
        for (const auto& path : given_and_real(needed)) {
            if (sandbox_sight(path) == SandboxSight::hidden &&
                std::find(hidden.begin(), hidden.end(), path) == hidden.end()) {
                hidden.push_back(path);
            }
        }
    }
    return hidden;
}

}  // namespace comfy::supervisor
