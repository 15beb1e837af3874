// Packs whose requirements clash, isolated by the one command, end to end: two packs need
// clashlib 1.0 and 2.0 (hand-made wheels: tests/environments/wheelhouse.py, as no package
// index is reachable), `comfyctl pack add` builds each one's environment over the host's
// interpreter and adds it to the config, and one supervisor runs both beside the ComfyUI
// host: each pack's node, called through the host's proxy, returns the version its own
// environment imported. Then one pack's requirement changes without a new add: its worker
// refuses to start, in one line naming what changed and the command that rebuilds it.
#include <catch2/catch.hpp>

#include "tests/python/bridge_checks_run.hpp"
#include "tests/support/supervisor_process.hpp"

#include <fstream>

using namespace comfy;
using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

// A pack whose one node, ClashVersion_NAME, returns the clashlib its interpreter imports.
std::string clash_pack(const TempFolder& folder, const std::string& name, const std::string& requirement) {
    const std::string dir = "packs/" + name;
    std::filesystem::create_directories(folder.path() / dir);
    folder.write(dir + "/__init__.py",
                 "import clashlib\n\n\n"
                 "class ClashVersion:\n"
                 "    CATEGORY = 'comfy-supervisor tests'\n"
                 "    FUNCTION = 'run'\n"
                 "    RETURN_TYPES = ('STRING',)\n\n"
                 "    @classmethod\n"
                 "    def INPUT_TYPES(cls):\n"
                 "        return {'required': {}}\n\n"
                 "    def run(self):\n"
                 "        return (clashlib.VERSION,)\n\n\n"
                 "NODE_CLASS_MAPPINGS = {'ClashVersion_" + name + "': ClashVersion}\n");
    folder.write(dir + "/requirements.txt", requirement + "\n");
    return (folder.path() / dir).string();
}

// `comfyctl pack add` of `pack` into the config `config`, offline from `wheels`.
CommandRun pack_add(const std::string& pack, const std::filesystem::path& config, const std::filesystem::path& wheels,
                    const std::filesystem::path& envs) {
    return run_and_capture(std::string(COMFYCTL_PATH) + " pack add '" + pack + "' --config '" + config.string() +
                           "' --no-index --find-links '" + wheels.string() + "' --envs '" + envs.string() + "' 2>&1");
}

}  // namespace

TEST_CASE("two packs isolated by comfyctl pack add run side by side with their own clashlib, and a changed "
          "requirement is refused at start as stale") {
    const TempFolder folder("pack-envs");
    const auto wheels = make_wheelhouse(folder.path() / "wheels");
    const std::string one = clash_pack(folder, "clash_one", "clashlib==1.0");
    const std::string two = clash_pack(folder, "clash_two", "clashlib==2.0");

    // The host's config before the add: the checkout and the host's Python, which the tool
    // takes for its defaults; the tool adds each pack.
    const std::vector<std::string> checks{"clashlib:clash_one=1.0", "clashlib:clash_two=2.0"};
    json config = config_checking(checks, json::array(), json::object());
    config["comfyui"]["checkout"] = FAKE_COMFYUI;
    const auto file = folder.write("sv.json", config.dump(2));
    const auto envs = folder.path() / "envs";
    for (const auto& pack : {one, two}) {
        const auto added = pack_add(pack, file, wheels, envs);
        INFO(added.output);
        REQUIRE(added.status == 0);
        CHECK_THAT(added.output, Contains("imports in its environment: 1 node classes"));
    }
    config = read_json(file);
    REQUIRE(config["packs"].size() == 2);
    const std::string env_one = config["packs"][0]["python"]["environment"];
    CHECK(env_one != config["packs"][1]["python"]["environment"].get<std::string>());

    {  // both in one ComfyUI, each with its own clashlib
        SupervisorProcess supervisor(config);
        finish_checks(supervisor, checks);
    }

    // clash_one now asks for clashlib 2.0, and nobody ran the add again.
    folder.write("packs/clash_one/requirements.txt", "clashlib==2.0\n");
    const std::vector<std::string> after{"failed:clash_one", "clashlib:clash_two=2.0"};
    config["comfyui"]["args"] = json::array({BRIDGE_CHECKS, after[0], after[1]});
    SupervisorProcess supervisor(config);
    const auto log = finish_checks(supervisor, after);
    CHECK_THAT(log, Contains("clash_one: pack_worker: pack clash_one's environment " + env_one +
                             " is stale (requirements.txt changed (now clashlib==2.0; no longer clashlib==1.0)): run "
                             "comfyctl pack add " + one + " --name clash_one --config "));
    CHECK(count_of(log, "clash_one: spawned pid") == 1);  // status 78: not restarted
}
