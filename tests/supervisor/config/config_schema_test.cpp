// The config's JSON Schema (supervisor/config/config.schema.json, for editors and CI) and
// the reader agree on the keys: in each object of a config that has every section, the
// keys the reader accepts (as its refusal of an unknown key lists them) are the keys the
// schema's object lists, no more and no fewer, and every object the schema describes is
// compared. The schema is not the reader's check: a schema validator's messages name the
// keyword that failed, not what the value should be, and paths, sizes' ranges and rules
// between keys are the reader's anyway (docs/CONFIG.md, "The JSON Schema").
#include <catch2/catch.hpp>

#include "supervisor/config/config.hpp"
#include "tests/support/supervisor_process.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

using namespace comfy::supervisor;
using comfy::test::TempFolder;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

using Pointer = json::json_pointer;

constexpr const char* kUnknownKey = "zz_unknown";

// `at` in the schema with every "$ref" followed ("#/definitions/x").
Pointer followed(const json& schema, Pointer at) {
    while (schema.at(at).contains("$ref")) at = Pointer(schema.at(at).at("$ref").get<std::string>().substr(1));
    return at;
}

// The schema of `value`, an object, at `at`: of a "oneOf", the branch with properties whose
// "const"s `value` matches (one it lacks only where not required), as the device's kinds.
Pointer object_schema(const json& schema, Pointer at, const json& value) {
    at = followed(schema, at);
    const json& node = schema.at(at);
    if (!node.contains("oneOf")) return at;
    for (std::size_t index = 0; index < node.at("oneOf").size(); ++index) {
        const Pointer branch = followed(schema, at / "oneOf" / index);
        const json& candidate = schema.at(branch);
        if (!candidate.contains("properties")) continue;
        const json required = candidate.contains("required") ? candidate.at("required") : json::array();
        bool fits = true;
        for (const auto& [key, property] : candidate.at("properties").items()) {
            if (!property.contains("const")) continue;
            const bool needed = std::find(required.begin(), required.end(), key) != required.end();
            if (value.contains(key) ? value.at(key) != property.at("const") : needed) fits = false;
        }
        if (fits) return branch;
    }
    return at;
}

// Every object the schema describes by its keys (not a map such as env), as a pointer.
void closed_objects(const json& node, const Pointer& at, std::set<std::string>& found) {
    if (node.is_object()) {
        if (node.contains("properties") && node.contains("additionalProperties") &&
            node.at("additionalProperties") == false) {
            found.insert(at.to_string());
        }
        for (const auto& [key, child] : node.items()) closed_objects(child, at / key, found);
    } else if (node.is_array()) {
        for (std::size_t index = 0; index < node.size(); ++index) closed_objects(node[index], at / index, found);
    }
}

class Agreement {
public:
    Agreement(const TempFolder& folder, json schema) : folder_(folder), schema_(std::move(schema)) {}

    // Compares every object of `config` (valid as it is) with the schema.
    void compare(const json& config) { walk(config, config, Pointer(), Pointer()); }

    const std::set<std::string>& compared() const { return compared_; }

private:
    void walk(const json& config, const json& value, const Pointer& at, const Pointer& schema_at) {
        if (value.is_array()) {
            for (std::size_t index = 0; index < value.size(); ++index) {
                walk(config, value[index], at / index, followed(schema_, schema_at) / "items");
            }
            return;
        }
        if (!value.is_object()) return;
        const Pointer object = object_schema(schema_, schema_at, value);
        if (!schema_.at(object).contains("properties")) return;  // a map, its names checked by rule
        std::set<std::string> listed;
        for (const auto& [key, property] : schema_.at(object).at("properties").items()) listed.insert(key);
        INFO("config " << at.to_string() << ", schema " << object.to_string());
        CHECK(reader_keys(config, at) == listed);
        compared_.insert(object.to_string());
        for (const auto& [key, child] : value.items()) walk(config, child, at / key, object / "properties" / key);
    }

    // The keys the reader accepts in the object at `at`, from its refusal of one more.
    std::set<std::string> reader_keys(json config, const Pointer& at) const {
        config.at(at)[kUnknownKey] = 1;
        const std::string file = folder_.write("config.json", config.dump()).string();
        std::string message;
        try {
            load_config(file);
        } catch (const ConfigError& error) {
            message = error.what();
        }
        INFO(message);
        const std::string opening =
            "at " + (at / kUnknownKey).to_string() + ": expected one of the keys ";
        const auto start = message.find(opening);
        REQUIRE(start != std::string::npos);
        const auto from = start + opening.size();
        const auto end = std::min(message.find(", found an unknown key", from), message.find(" (", from));
        std::set<std::string> keys;
        std::istringstream list(message.substr(from, end - from));
        for (std::string key; std::getline(list >> std::ws, key, ',');) keys.insert(key);
        return keys;
    }

    const TempFolder& folder_;
    json schema_;
    std::set<std::string> compared_;
};

// A config with every section and every object a section can hold; `device` as given.
json every_object(const TempFolder& folder, const json& device) {
    const auto worker = folder.write("worker.sh", "#!/bin/sh\nexit 0\n");
    fs::permissions(worker, static_cast<fs::perms>(0755));
    fs::create_directories(folder.path() / "pack");
    fs::create_directories(folder.path() / "checkout");
    folder.write("pack/__init__.py", "NODE_CLASS_MAPPINGS = {}\n");
    const json restart = {{"initial_backoff_ms", 10}};
    const json sandbox = {{"network", false}};
    return {{"device", device},
            {"limits", {{"participants", 8}}},
            {"memory", {{"no_fit", "admit"}}},
            {"host", {{"idle_release_ms", 0}}},
            {"http", {{"listen", "127.0.0.1:0"}}},
            {"comfyui",
             {{"command", "worker.sh"}, {"checkout", "checkout"}, {"env", {{"A", "1"}}}, {"restart", restart},
              {"sandbox", sandbox}, {"browser_messages", {{"per_second", 10}}}}},
            {"environments", {{"root", "envs"}, {"find_links", {"wheels"}}, {"no_index", true}}},
            {"packs",
             {{{"name", "a"}, {"command", "worker.sh"}, {"restart", restart}, {"sandbox", sandbox}},
              {{"name", "b"}, {"python", {{"pack", "pack"}, {"interpreter", "worker.sh"}}}}}}};
}

}  // namespace

TEST_CASE("the config's JSON Schema lists the keys the reader accepts in every object, no more and no fewer") {
    const TempFolder folder("schema");
    std::ifstream file(COMFY_SV_CONFIG_SCHEMA);
    REQUIRE(file);
    const json schema = json::parse(file);
    Agreement agreement(folder, schema);

    agreement.compare(every_object(folder, {{"kind", "simulated"}}));
    agreement.compare(every_object(folder, {{"kind", "cuda"}}));

    std::set<std::string> described;
    closed_objects(schema, Pointer(), described);
    CHECK(agreement.compared() == described);
}
