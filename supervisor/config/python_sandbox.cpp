// What a sandboxed Python pack needs shown in its sandbox. The sandbox shows the file system
// read-only but puts empty folders of its own over /tmp, /run and /dev/shm, and its own /dev
// and /proc (lifecycle/sandbox.cpp): a pack folder, a ComfyUI checkout, the supervisor's
// Python package or library, an interpreter and its venv, or a folder of the pack's own
// PYTHONPATH that lie there would be missing,
// and the worker would die at every start (No module named 'comfy_supervisor'). So each one
// that lies there joins the sandbox's readable list, both by the path the worker is given
// and where its links lead; one that is, or holds, a folder the sandbox makes its own cannot
// be shown without undoing the sandbox, and is refused at load. An environment that
// `comfyctl pack add` builds is the exception: what it runs from is shown as it is at each
// start (lifecycle/sandbox.cpp), since it may be missing at load.

#include "supervisor/config/install_layout.hpp"
#include "supervisor/config/sandbox_sight.hpp"
#include "supervisor/config/sections.hpp"

#include <algorithm>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace comfy::supervisor::config_loader {

namespace {

// A path the worker needs, with the config's key it comes from (for a refusal's one line)
// and what it is, in words.
struct Needed {
    fs::path path;
    Pointer at;
    std::string what;
};

class Shown {
public:
    Shown(const ConfigReader& reader, SandboxConfig& sandbox) : reader_(reader), sandbox_(sandbox) {}

    // `needed` as the worker is given it and, where links lead elsewhere, as they resolve.
    void add(const Needed& needed) {
        for (const auto& path : given_and_real(needed.path)) add_one(needed, path);
    }

    // Refused when no sandbox can show it; not added, as it is worked out at each start.
    void refuse_unshowable(const Needed& needed) const {
        if (sandbox_sight(needed.path) == SandboxSight::unshowable) refuse(needed, needed.path);
    }

private:
    void add_one(const Needed& needed, const fs::path& path) {
        const auto sight = sandbox_sight(path);
        if (sight == SandboxSight::unshowable) refuse(needed, path);
        auto& readable = sandbox_.readable;
        if (sight == SandboxSight::hidden &&
            std::find(readable.begin(), readable.end(), path.string()) == readable.end()) {
            readable.push_back(path.string());
        }
    }

    void refuse(const Needed& needed, const fs::path& path) const {
        reader_.fail(needed.at,
                     "a folder a sandbox can show by itself: not /tmp, /run, /dev, /proc or a folder holding "
                     "one, nor one inside /proc",
                     describe_json_value(path.string()) + " (" + needed.what +
                         ", which a sandboxed Python pack needs shown: move it into a folder of its own, or "
                         "remove the pack's \"sandbox\")");
    }

    const ConfigReader& reader_;
    SandboxConfig& sandbox_;
};

}  // namespace

void add_python_sandbox_paths(const ConfigReader& reader, const Node& node, PackConfig& pack) {
    const PythonPack& python = *pack.python;
    const Node section = *member(node, "python");
    Shown shown(reader, *pack.sandbox);
    const Node folders = *member(section, "pack");
    for (std::size_t index = 0; index < python.folders.size(); ++index) {
        shown.add({python.folders[index], folders.value.is_array() ? folders.at / index : folders.at, "the pack"});
    }
    const auto comfyui = member(section, "comfyui");
    shown.add({python.comfyui, comfyui ? comfyui->at : Pointer("/comfyui/checkout"), "the ComfyUI checkout"});
    const auto given = member(section, "interpreter") ? member(section, "interpreter") : member(section, "environment");
    const Pointer interpreter_at = given ? given->at : section.at;
    if (!python.environment.empty()) {
        // What it runs from is shown as it is at each start (lifecycle/sandbox.cpp): it may be
        // missing now, and rebuilt from another Python later.
        shown.refuse_unshowable({python.environment, interpreter_at, "the pack's environment"});
    } else {
        for (const auto& part : interpreter_needs(python.interpreter)) {
            shown.add({part, interpreter_at, "the interpreter, its venv or its standard library"});
        }
    }
    const Pointer sandbox_at = node.at / "sandbox";
    shown.add({python_package_dir(), sandbox_at, "the folder of the supervisor's Python package"});
    if (const std::string library = participant_library(); !library.empty()) {
        shown.add({library, sandbox_at, "the supervisor's participant library"});
    }
    // The folders the pack's own PYTHONPATH adds after ours (add_python_path): those that
    // exist, as Python skips the others.
    const auto path = pack.env.find(std::string(kPythonPathVariable));
    std::string_view rest = path != pack.env.end() ? std::string_view(path->second) : std::string_view();
    while (!rest.empty()) {
        const auto colon = rest.find(':');
        const fs::path entry(rest.substr(0, colon));
        std::error_code error;
        if (entry.is_absolute() && fs::exists(entry, error)) {
            shown.add({entry, node.at / "env" / "PYTHONPATH", "a folder of the pack's PYTHONPATH"});
        }
        rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    }
}

}  // namespace comfy::supervisor::config_loader
