#include "tests/soak/soak_setup.hpp"

#include <nlohmann/json.hpp>

#include <fstream>
#include <stdexcept>

namespace comfy::soak {

std::string hostile_pack(const HostileMode& mode) { return std::string("hostile-") + mode.mode; }

namespace {

using nlohmann::json;

// The demo's repeat is 4; a soak is stopped by SIGTERM long before this many.
constexpr int kRepeat = 100000;

json read_json(const std::filesystem::path& file) {
    std::ifstream in(file);
    if (!in) throw std::runtime_error(file.string() + ": cannot read; run from a full checkout");
    return json::parse(in);
}

void write_json(const std::filesystem::path& file, const json& document) {
    std::ofstream out(file);
    out << document.dump(2) << "\n";
    if (!out) throw std::runtime_error(file.string() + ": cannot write");
}

// Restarted however often the soak kills it, soon after each death.
json restart_always() {
    return {{"initial_backoff_ms", 100}, {"max_backoff_ms", 1000}, {"max_restarts", 1000}, {"window_ms", 60000}};
}

// The demo's config with paths made absolute (`examples` is the demo's folder, `worker`
// and `misbehaving` the binaries), limits and restarts for the soak, and the hostile and
// deaf packs added.
json soak_config(json demo, const std::filesystem::path& examples, const std::string& worker,
                 const std::string& misbehaving) {
    demo["limits"]["heartbeat_timeout_ms"] = kHeartbeatTimeout.count();
    demo["limits"]["handshake_timeout_ms"] = 20000;  // Python's start on a loaded machine
    demo["limits"]["shutdown_grace_ms"] = 2000;      // the deaf pack is killed after it
    demo["memory"]["answer_timeout_ms"] = kAnswerTimeout.count();
    // The demo's relative paths are relative to its own folder: run there.
    // The config's own paths are relative to the config file's folder, which is the soak's.
    const auto from_examples = [&](const json& path) { return (examples / path.get<std::string>()).lexically_normal().string(); };
    demo["comfyui"]["working_directory"] = examples.string();
    demo["comfyui"]["checkout"] = from_examples(demo["comfyui"]["checkout"]);
    demo["comfyui"]["restart"] = restart_always();
    for (auto& pack : demo["packs"]) {
        if (pack.contains("python")) {
            pack["python"]["pack"] = from_examples(pack["python"]["pack"]);
        } else {
            pack["command"] = worker;
        }
        pack["working_directory"] = examples.string();
        pack["restart"] = restart_always();
    }
    for (const auto& mode : kHostileModes) {
        demo["packs"].push_back({{"name", hostile_pack(mode)}, {"command", misbehaving},
                                 {"args", {mode.mode, "--when-signalled"}}, {"restart", restart_always()}});
    }
    // 128 models of 1 MiB, the first in the eviction order: without the deaf mark, each load
    // short of memory would wait 128 answer time-outs on it.
    demo["packs"].push_back({{"name", kDeafPack},
                             {"command", misbehaving},
                             {"args", {"deaf-filler", std::to_string(kDeafPackModels)}},
                             {"restart", restart_always()}});
    demo["packs"].push_back({{"name", kHostileCallsPack},
                             {"python",
                              {{"pack", COMFY_HOSTILE_PACK_DIR},
                               {"interpreter", "/usr/bin/python3"},
                               {"cancel_grace_ms", kCancelGrace.count()}}},
                             {"env", {{"PYTHONDONTWRITEBYTECODE", "1"}}},
                             {"working_directory", examples.string()},
                             {"restart", restart_always()}});
    demo["packs"].push_back({{"name", kHostileArenaPack},
                             {"python", {{"pack", COMFY_ARENA_HOSTILE_PACK_DIR}, {"interpreter", "/usr/bin/python3"}}},
                             {"env", {{"PYTHONDONTWRITEBYTECODE", "1"}}},
                             {"working_directory", examples.string()},
                             {"restart", restart_always()}});
    for (const auto& [flag, pack] : {std::pair{"--hostile-calls", kHostileCallsPack}, {"--hostile-arena", kHostileArenaPack}}) {
        demo["comfyui"]["args"].push_back(flag);
        demo["comfyui"]["args"].push_back(pack);
    }
    return demo;
}

}  // namespace

SoakSetup write_soak_setup(const std::filesystem::path& folder) {
    const std::filesystem::path examples = COMFY_EXAMPLES_DIR;
    // Named: a range-for below over a member of a temporary would outlive the temporary.
    const json demo = read_json(examples / "demo.json");
    const json config = soak_config(demo, examples, COMFY_WORKER_PATH, MISBEHAVING_WORKER_PATH);
    json workload = read_json(examples / "workload.json");
    workload["repeat"] = kRepeat;
    SoakSetup setup{folder / "config.json", folder / "workload.json", {}, {}};
    write_json(setup.config, config);
    write_json(setup.workload, workload);
    setup.demo_participants.push_back("host");
    for (const auto& pack : demo["packs"]) {
        setup.demo_participants.push_back(pack["name"].get<std::string>());
    }
    setup.participants.push_back("host");
    for (const auto& pack : config["packs"]) setup.participants.push_back(pack["name"].get<std::string>());
    return setup;
}

}  // namespace comfy::soak
