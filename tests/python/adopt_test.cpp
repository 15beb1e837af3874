// A user's whole ComfyUI isolated by one command, end to end: a ComfyUI checkout (links to
// the fake upstream, and a main.py that imports custom_nodes by upstream's rules:
// tests/host/adopted_comfyui_main.py) whose custom_nodes holds two packs that share a type,
// two whose pins conflict, one that fails to import, one whose author keeps it in ComfyUI's
// process, one the user keeps there, and entries ComfyUI itself passes over. `comfyctl adopt`
// plans, builds and writes the config; under the supervisor, ComfyUI then registers every
// node it registered with every pack in its own process. A re-run changes nothing, and one
// after a pack is removed takes out that pack alone.
#include <catch2/catch.hpp>

#include "tests/python/bridge_checks_run.hpp"
#include "tests/support/supervisor_process.hpp"

#include <fstream>
#include <set>

using namespace comfy;
using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

namespace fs = std::filesystem;

// A pack whose node ClashVersion_NAME needs clashlib at the version `requirement` pins.
void clash_pack(const fs::path& custom_nodes, const std::string& name, const std::string& requirement) {
    fs::create_directories(custom_nodes / name);
    std::ofstream(custom_nodes / name / "__init__.py")
        << "import clashlib\n\n\nclass ClashVersion:\n    CATEGORY = 'adopt test'\n    FUNCTION = 'run'\n"
           "    RETURN_TYPES = ('STRING',)\n\n    @classmethod\n    def INPUT_TYPES(cls):\n"
           "        return {'required': {}}\n\n    def run(self):\n        return (clashlib.VERSION,)\n\n\n"
           "NODE_CLASS_MAPPINGS = {'ClashVersion_" << name << "': ClashVersion}\n";
    std::ofstream(custom_nodes / name / "requirements.txt") << requirement << "\n";
}

// A pack whose author says, in ComfyUI's own isolation table, that it cannot be isolated.
void host_only_pack(const fs::path& custom_nodes) {
    fs::create_directories(custom_nodes / "host_only");
    std::ofstream(custom_nodes / "host_only" / "__init__.py")
        << "class HostOnly:\n    CATEGORY = 'adopt test'\n    FUNCTION = 'run'\n    RETURN_TYPES = ('INT',)\n\n"
           "    @classmethod\n    def INPUT_TYPES(cls):\n        return {'required': {}}\n\n"
           "    def run(self):\n        return (1,)\n\n\nNODE_CLASS_MAPPINGS = {'HostOnly': HostOnly}\n";
    std::ofstream(custom_nodes / "host_only" / "pyproject.toml")
        << "[project]\nname = 'host-only'\n\n[tool.comfy.isolation]\ncan_isolate = false\n";
}

// The checkout: fake_comfyui's entries linked, the adopt test's main.py, and custom_nodes.
fs::path make_checkout(const fs::path& root) {
    const fs::path checkout = root / "ComfyUI";
    fs::create_directories(checkout / "custom_nodes");
    for (const auto& entry : fs::directory_iterator(FAKE_COMFYUI)) {
        const auto name = entry.path().filename().string();
        if (name != "main.py" && name != "__pycache__") fs::create_symlink(entry.path(), checkout / name);
    }
    fs::copy_file(ADOPTED_COMFYUI_MAIN, checkout / "main.py");
    const fs::path custom_nodes = checkout / "custom_nodes";
    for (const auto* pack : {"group_maker", "group_taker", "broken_pack", "routes_pack"}) {
        fs::copy(fs::path(TEST_PACKS) / pack, custom_nodes / pack, fs::copy_options::recursive);
    }
    clash_pack(custom_nodes, "clash_one", "clashlib==1.0");
    clash_pack(custom_nodes, "clash_two", "clashlib==2.0");
    host_only_pack(custom_nodes);
    fs::copy(fs::path(TEST_PACKS) / "example_pack", custom_nodes / "old_pack.disabled", fs::copy_options::recursive);
    fs::create_directories(custom_nodes / "notes");  // no __init__.py: not a pack
    std::ofstream(custom_nodes / "README.txt") << "not a pack\n";
    return checkout;
}

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

CommandRun adopt(const fs::path& checkout, const fs::path& config, const fs::path& wheels, const std::string& more) {
    return run_and_capture("COMFY_SV_TOOL_PYTHON=" + std::string(PYTHON3_PATH) + " " + std::string(COMFYCTL_PATH) +
                           " adopt " + quoted(checkout) + " --config " + quoted(config) + " --host-python " +
                           PYTHON3_PATH + " --no-index --find-links " + quoted(wheels) + " --envs " +
                           quoted(config.parent_path() / "envs") + " --keep-in-host routes_pack " + more + " 2>&1");
}

// The node classes a log's "adopted_comfyui: registered [...]" line names.
std::set<std::string> registered(const std::string& log) {
    const std::string mark = "adopted_comfyui: registered ";
    const auto at = log.find(mark);
    if (at == std::string::npos) return {};
    const auto end = log.find('\n', at);
    const auto names = json::parse(log.substr(at + mark.size(), end - at - mark.size()));
    return {names.begin(), names.end()};
}

}  // namespace

TEST_CASE("comfyctl adopt isolates a ComfyUI's custom_nodes in one command: every node of one process registers, "
          "and a re-run changes only what changed") {
    const TempFolder folder("adopt");
    const auto wheels = make_wheelhouse(folder.path() / "wheels");
    const auto checkout = make_checkout(folder.path());

    // One process: every pack imported by ComfyUI itself (clashlib 1.0 installed for it).
    const auto clashlib = folder.path() / "clashlib-1.0";
    REQUIRE(run_and_capture("cd " + quoted(folder.path()) + " && " + PYTHON3_PATH +
                            " -m zipfile -e " + quoted(wheels / "clashlib-1.0-py3-none-any.whl") + " " +
                            quoted(clashlib)).status == 0);
    const auto alone = run_and_capture("PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=" + quoted(clashlib) + " " +
                                       PYTHON3_PATH + " " + quoted(checkout / "main.py") + " 2>&1");
    INFO(alone.output);
    REQUIRE(alone.status == 0);
    const auto one_process = registered(alone.output);
    REQUIRE(one_process.count("MakeSharedThing") == 1);
    REQUIRE(one_process.count("HostOnly") == 1);

    // The config before: the device alone; adopt writes the rest.
    const auto config_file = folder.write("sv.json", memory_config_of(json::array()).dump(2));
    const auto before = read_file(config_file);
    const auto dry = adopt(checkout, config_file, wheels, "--dry-run");
    INFO(dry.output);
    CHECK(dry.status == 0);
    CHECK_THAT(dry.output, Contains("estimate"));
    CHECK_THAT(dry.output, Contains("nothing written"));
    CHECK(read_file(config_file) == before);
    CHECK_FALSE(fs::exists(fs::symlink_status(checkout / "custom_nodes" / "comfy_supervisor")));
    CHECK_FALSE(fs::exists(folder.path() / "envs"));

    const auto done = adopt(checkout, config_file, wheels, "");
    INFO(done.output);
    // broken_pack imports nowhere: it is named, left where it was, and the status says so.
    CHECK(done.status == 1);
    CHECK_THAT(done.output, Contains("host_only"));
    CHECK_THAT(done.output, Contains("can_isolate = false"));
    CHECK_THAT(done.output, Contains("you asked (--keep-in-host)"));
    CHECK_THAT(done.output, Contains("share SHARED_THING"));
    CHECK_THAT(done.output, Contains("could not be isolated, so left in ComfyUI's process: broken_pack"));
    CHECK_THAT(done.output, Contains("OK: the ComfyUI host and 3 packs"));  // comfy-supervisor check
    auto config = read_json(config_file);
    std::map<std::string, json> entries;
    for (const auto& entry : config["packs"]) entries[entry["name"]] = entry;
    REQUIRE(entries.size() == 3);
    CHECK(entries.count("clash_one") == 1);
    CHECK(entries.count("clash_two") == 1);
    CHECK(entries.count("group_maker-group_taker") == 1);
    CHECK(entries["clash_one"]["python"]["environment"] != entries["clash_two"]["python"]["environment"]);
    CHECK(entries["clash_one"]["env"] == config["comfyui"]["env"]);  // ComfyUI's variables, for its packs too
    const auto args = config["comfyui"]["args"];
    CHECK(args[args.size() - 6] == "--disable-all-custom-nodes");
    CHECK(args[args.size() - 5] == "--whitelist-custom-nodes");
    CHECK(std::set<std::string>(args.end() - 4, args.end()) ==
          std::set<std::string>{"comfy_supervisor", "broken_pack", "host_only", "routes_pack"});

    {  // Supervised: the same nodes register, the isolated ones through their workers.
        SupervisorProcess supervisor(config);
        const bool up = eventually([&] { return !registered(supervisor.log()).empty(); }, std::chrono::seconds(180));
        const auto log = supervisor.log();
        INFO(log);
        REQUIRE(up);
        CHECK(registered(log) == one_process);
        CHECK(supervisor.stop() == 0);
    }

    // Nothing changed: nothing written.
    const auto written = read_file(config_file);
    const auto again = adopt(checkout, config_file, wheels, "");
    INFO(again.output);
    CHECK_THAT(again.output, Contains("nothing changed"));
    CHECK(read_file(config_file) == written);

    // A pack removed: its entry and its environment go, the others stay as they were.
    const std::string gone_env = entries["clash_two"]["python"]["environment"];
    fs::remove_all(checkout / "custom_nodes" / "clash_two");
    const auto after = adopt(checkout, config_file, wheels, "");
    INFO(after.output);
    config = read_json(config_file);
    std::map<std::string, json> now;
    for (const auto& entry : config["packs"]) now[entry["name"]] = entry;
    CHECK(now.size() == 2);
    CHECK(now["clash_one"] == entries["clash_one"]);
    CHECK(now["group_maker-group_taker"] == entries["group_maker-group_taker"]);
    CHECK_FALSE(fs::exists(gone_env));
}

TEST_CASE("comfyctl adopt --from adopts only what a ComfyUI-Manager snapshot or a comfy-cli lock lists, disabled "
          "ones left as they are") {
    const TempFolder folder("adopt-from");
    const auto checkout = make_checkout(folder.path());
    const auto config_file = folder.write("sv.json", memory_config_of(json::array()).dump(2));
    // Manager's snapshot: a git pack by its repository's name, a registry pack by its
    // pyproject name (host_only's is "host-only"), a disabled one.
    const auto snapshot = folder.write(
        "snapshot.json",
        R"({"comfyui": "4b2ef9a1", "pips": {},
            "git_custom_nodes": {"https://github.com/someone/clash_one.git": {"hash": "1", "disabled": false},
                                 "https://github.com/someone/clash_two": {"hash": "2", "disabled": true}},
            "cnr_custom_nodes": {"host-only": "1.0.0"},
            "file_custom_nodes": [{"filename": "gone.py", "disabled": false}]})");
    // comfy-cli's lock: the same lists under custom_nodes.
    const auto lock = folder.write("comfy-lock.yaml",
                                   "basic: {}\ncustom_nodes:\n  git_custom_nodes:\n"
                                   "    https://github.com/someone/group_maker: {hash: '3', disabled: false}\n"
                                   "  cnr_custom_nodes: {}\n  file_custom_nodes: []\n");
    const auto wheels = folder.path() / "wheels";  // not read: a dry run builds nothing
    const auto from_snapshot = adopt(checkout, config_file, wheels, "--dry-run --from " + quoted(snapshot));
    INFO(from_snapshot.output);
    CHECK(from_snapshot.status == 0);
    CHECK_THAT(from_snapshot.output, Contains("isolate  clash_one"));
    CHECK_THAT(from_snapshot.output, Contains("can_isolate = false"));  // host_only: listed, kept by its author
    CHECK_THAT(from_snapshot.output, Contains("keep     clash_two"));
    // clash_two (disabled there), group_maker, group_taker, broken_pack, routes_pack
    CHECK(count_of(from_snapshot.output, "not in the pack list given (--from)") == 5);
    const auto from_lock = adopt(checkout, config_file, wheels, "--dry-run --from " + quoted(lock));
    INFO(from_lock.output);
    CHECK(from_lock.status == 0);
    // group_maker is listed; group_taker, which shares its type, is not: both stay.
    CHECK_THAT(from_lock.output, Contains("shares SHARED_THING with group_taker"));
    const auto bad = adopt(checkout, config_file, wheels, "--dry-run --from " + quoted(config_file));
    CHECK(bad.status == 2);
    CHECK_THAT(bad.output, Contains("comfyctl adopt: " + config_file.string() + " lists no packs"));
    CHECK(read_file(config_file) == memory_config_of(json::array()).dump(2));
}
