// Reads a pack's "python" section: the pack's interpreter runs comfy_supervisor.pack_worker
// on the pack's folder (or a group's folders), with the ComfyUI checkout's comfy package on
// its path. The supervisor, not the config, makes such a pack's command line and the head
// of its PYTHONPATH, so that the config names only the pack, the interpreter and the checkout.

#include "supervisor/config/install_layout.hpp"
#include "supervisor/config/sections.hpp"

#include <algorithm>
#include <cstdlib>
#include <system_error>

namespace comfy::supervisor::config_loader {

namespace {

constexpr const char* kPackFolderRule = "a custom node pack's folder (a directory with __init__.py)";
constexpr const char* kPackFoldersRule =
    "a custom node pack's folder (a directory with __init__.py), or a list of them (a group, run in one worker)";
// 0: a node that is still running at Cancel is ended at once; at most an hour.
constexpr Range kCancelGraceMs{0, 3'600'000};

// Empty when `folder` is what ComfyUI imports as a custom node pack; otherwise why not.
std::string pack_folder_problem(const fs::path& folder) {
    if (auto problem = directory_problem(folder); !problem.empty()) return problem;
    std::error_code error;
    if (!fs::is_regular_file(folder / "__init__.py", error)) return "no __init__.py in it";
    return {};
}

// The first executable `name` in the supervisor's PATH, as a shell would find it now
// (absolute, links kept); empty when there is none.
fs::path find_in_path(std::string_view name) {
    const char* path = std::getenv("PATH");
    std::string_view rest = path != nullptr ? path : "";
    while (true) {
        const auto colon = rest.find(':');
        const std::string_view entry = rest.substr(0, colon);
        std::error_code error;
        const fs::path candidate =
            fs::absolute(fs::path(entry.empty() ? "." : std::string(entry)) / name, error).lexically_normal();
        if (!error && executable_problem(candidate).empty()) return candidate;
        if (colon == std::string_view::npos) return {};
        rest.remove_prefix(colon + 1);
    }
}

std::string read_pack_folder(const ConfigReader& reader, const Node& node, std::string_view rule) {
    const fs::path folder = reader.read_path(node, rule);
    if (const auto problem = pack_folder_problem(folder); !problem.empty()) {
        reader.fail(node.at, kPackFolderRule,
                    describe_json_value(node.value) + " (" + folder.string() + ": " + problem + ")");
    }
    return folder.string();
}

// One folder, or a group's list. ComfyUI imports a pack as the module of its folder's name
// (and serves its front end under it), so two folders of one name cannot share a worker.
std::vector<std::string> read_pack_folders(const ConfigReader& reader, const Node& node) {
    if (!node.value.is_array()) return {read_pack_folder(reader, node, kPackFoldersRule)};
    if (node.value.empty()) reader.fail(node.at, kPackFoldersRule, "[]");
    std::vector<std::string> folders;
    for (std::size_t index = 0; index < node.value.size(); ++index) {
        const Node entry{node.value[index], node.at / index};
        std::string folder = read_pack_folder(reader, entry, kPackFolderRule);
        for (std::size_t other = 0; other < folders.size(); ++other) {
            if (folders[other] == folder) {
                reader.fail(entry.at, "each folder once",
                            describe_json_value(entry.value) + " (also " + path_text(node.at / other) + ")");
            }
            if (fs::path(folders[other]).filename() == fs::path(folder).filename()) {
                reader.fail(entry.at,
                            "a folder whose name no other folder of the group has (ComfyUI imports a pack as the "
                            "module of its folder's name)",
                            describe_json_value(entry.value) + " (the name of " + path_text(node.at / other) + " too)");
            }
        }
        folders.push_back(std::move(folder));
    }
    return folders;
}

}  // namespace

void read_python(const ConfigReader& reader, const Node& node, PackConfig& pack, const std::string& checkout) {
    reader.expect_object(node, {"pack", "interpreter", "environment", "comfyui", "comfyui_args", "arena_bytes",
                                "cuda_ipc", "cancel_grace_ms", "warm_template"});
    PythonPack python;
    python.folders = read_pack_folders(reader, reader.required(node, "pack", kPackFoldersRule));
    const auto environment = member(node, "environment");
    if (const auto interpreter = member(node, "interpreter")) {
        if (environment) {
            reader.fail(environment->at, "one of interpreter and environment (the environment's is bin/python)",
                        "both");
        }
        python.interpreter = reader.read_command(*interpreter);
    } else if (environment) {
        // Whether it is there and whole is asked before each start of the pack
        // (environment_problem.hpp), never here: one that is missing or unreadable fails its
        // pack alone, and the instance comes up without it.
        python.environment =
            reader.read_path(*environment, "the folder of a pack's environment (comfyctl pack add builds one)").string();
        python.build_command =
            "comfyctl pack add " + python.folders.front() + " --name " + pack.name + " --config " + reader.file();
        python.interpreter = (fs::path(python.environment) / "bin" / "python").string();
    } else {
        python.interpreter = find_in_path("python3").string();
        if (python.interpreter.empty()) {
            reader.fail(node.at / "interpreter",
                        "a Python interpreter: there is no python3 on the supervisor's PATH, so set " +
                            path_text(node.at / "interpreter"),
                        kFoundNothing);
        }
    }
    if (const auto comfyui = member(node, "comfyui")) {
        python.comfyui = reader.read_directory(*comfyui);
    } else if (!checkout.empty()) {
        python.comfyui = checkout;
    } else {
        reader.fail(node.at, "a ComfyUI checkout: set /comfyui/checkout or " + path_text(node.at / "comfyui"),
                    kFoundNothing);
    }
    if (const auto arena = member(node, "arena_bytes")) pack.arena_bytes = reader.read_size(*arena, kArenaBytes);
    if (const auto flags = member(node, "comfyui_args")) python.comfyui_args = reader.read_args(*flags);
    if (const auto ipc = member(node, "cuda_ipc")) python.cuda_ipc = reader.read_flag(*ipc);
    if (const auto warm = member(node, "warm_template")) python.warm_template = reader.read_flag(*warm);
    if (const auto grace = member(node, "cancel_grace_ms")) python.cancel_grace = reader.read_ms(*grace, kCancelGraceMs);
    pack.command = python.interpreter;
    pack.bridges = true;
    pack.python = std::move(python);
}

// Ours first, so that the pack's interpreter finds comfy_supervisor; the pack's own
// PYTHONPATH after it. One passed through from the supervisor's environment could not
// be joined at spawn without a rule nobody would guess, so it is refused.
void add_python_path(const ConfigReader& reader, const Node& node, PackConfig& pack) {
    const auto& allowed = pack.env_allowlist;
    if (const auto found = std::find(allowed.begin(), allowed.end(), kPythonPathVariable); found != allowed.end()) {
        reader.fail(node.at / "env_allowlist" / static_cast<std::size_t>(found - allowed.begin()),
                    "a variable other than PYTHONPATH in a Python pack (the supervisor sets it; give yours in env, "
                    "which it joins after its own)",
                    describe_json_value(*found));
    }
    // The folder of comfy_supervisor, so that the pack's interpreter finds pack_worker.
    const std::string ours = python_package_dir();
    std::string& path = pack.env[kPythonPathVariable];
    path = path.empty() ? ours : ours + ":" + path;
}

// A Python pack's command line, once its sandbox is known: --pack once a folder, in order.
std::vector<std::string> pack_worker_args(const PackConfig& pack, const std::string& config_file) {
    const PythonPack& python = *pack.python;
    std::vector<std::string> args{"-m", "comfy_supervisor.pack_worker"};
    for (const auto& folder : python.folders) args.insert(args.end(), {"--pack", folder});
    args.insert(args.end(), {"--comfyui", python.comfyui, "--name", pack.name, "--config", config_file});
    if (!python.cuda_ipc.value_or(!pack.sandbox.has_value())) args.push_back("--no-cuda-ipc");
    // ComfyUI's own flags (--cpu, --lowvram...), for the worker's comfy package to parse
    // as main.py has it parse them.
    if (!python.comfyui_args.empty()) {
        args.push_back("--");
        args.insert(args.end(), python.comfyui_args.begin(), python.comfyui_args.end());
    }
    return args;
}

}  // namespace comfy::supervisor::config_loader
