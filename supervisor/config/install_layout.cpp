#include "supervisor/config/install_layout.hpp"

#include <filesystem>
#include <optional>
#include <system_error>

namespace comfy::supervisor {
namespace {

namespace fs = std::filesystem;

// This program's folder, and whether it is the build's bin (where CMake puts every program
// it builds) rather than an installed bin.
struct OwnFolder {
    fs::path path;
    bool build_tree;
};

std::optional<OwnFolder> read_own_folder() {
    std::error_code error;
    const fs::path exe = fs::read_symlink("/proc/self/exe", error);
    if (error) return std::nullopt;
    // Equivalence, not string equality: the build folder may be reached through a link.
    // An error (no build folder on this machine) means installed.
    const bool build_tree = fs::equivalent(exe.parent_path(), COMFY_SV_BUILD_BIN_DIR, error);
    return OwnFolder{exe.parent_path(), build_tree && !error};
}

const std::optional<OwnFolder>& own_folder() {
    static const std::optional<OwnFolder> folder = read_own_folder();
    return folder;
}

}  // namespace

std::string python_package_dir() {
    const auto& own = own_folder();
    // Without /proc/self/exe there is no telling; the build's is the one this program knows.
    if (!own || own->build_tree) return COMFY_SV_SOURCE_PYTHON_DIR;
    return (own->path / COMFY_SV_INSTALLED_PYTHON_DIR).lexically_normal().string();
}

std::string participant_library() {
    const auto& own = own_folder();
    if (!own) return {};
    const fs::path library = own->build_tree ? fs::path(COMFY_SV_BUILD_LIBRARY)
                                             : (own->path / COMFY_SV_INSTALLED_LIBRARY).lexically_normal();
    std::error_code error;
    return fs::exists(library, error) ? library.string() : std::string{};
}

}  // namespace comfy::supervisor
