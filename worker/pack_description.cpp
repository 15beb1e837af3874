#include "worker/pack_description.hpp"

#include "shared/byte_size.hpp"
#include "shared/json_errors.hpp"
#include "shared/message_payloads.hpp"

#include <nlohmann/json.hpp>

namespace comfy::worker {

namespace {

using nlohmann::json;

struct Reader {
    std::string file;

    [[noreturn]] void fail(const std::string& path, const std::string& expected, const json& found) const {
        throw std::runtime_error(json_value_error_message(file, path, expected, found));
    }

    std::uint64_t bytes(const json& value, const std::string& path) const {
        if (value.is_number_unsigned()) return value.get<std::uint64_t>();
        if (value.is_string()) {
            if (const auto parsed = parse_byte_size(value.get<std::string>()); parsed && *parsed <= kMaxBytes) {
                return *parsed;
            }
        }
        fail(path, "a byte size such as 6GiB or 512MiB", value);
    }

    std::string text(const json& value, const std::string& path) const {
        if (!value.is_string() || value.get<std::string>().empty()) fail(path, "a non-empty string", value);
        return value.get<std::string>();
    }

    const json& field(const json& object, const char* key, const std::string& path) const {
        if (!object.contains(key)) fail(path, std::string("a field \"") + key + "\"", object);
        return object.at(key);
    }

    std::uint32_t milliseconds(const json& value, const std::string& path) const {
        if (!value.is_number_unsigned() || value.get<std::uint64_t>() > 3'600'000) {
            fail(path, "milliseconds from 0 to 3600000", value);
        }
        return value.get<std::uint32_t>();
    }

    Step step(const json& value, const std::string& path) const {
        if (!value.is_object()) fail(path, "a step object", value);
        const std::string op = text(field(value, "op", path), path + "/op");
        for (const auto& [key, unused] : value.items()) {
            const bool known = key == "op" || key == "model" || key == "bytes" || key == "ms" ||
                               key == "cast_buffer" || key == "patch_pins";
            if (!known) fail(path + "/" + key, "one of op, model, bytes, ms, cast_buffer, patch_pins", json(key));
            if (op != "compute" && (key == "cast_buffer" || key == "patch_pins")) {
                fail(path + "/" + key, key + " only in a compute step", json(op));
            }
        }
        Step s{};
        if (op == "load_model") {
            s.kind = StepKind::load_model;
            s.model = text(field(value, "model", path), path + "/model");
            s.bytes = bytes(field(value, "bytes", path), path + "/bytes");
        } else if (op == "drop_model") {
            s.kind = StepKind::drop_model;
            s.model = text(field(value, "model", path), path + "/model");
        } else if (op == "compute") {
            s.kind = StepKind::compute;
            s.ms = milliseconds(field(value, "ms", path), path + "/ms");
            if (value.contains("cast_buffer")) s.cast_buffer = bytes(value.at("cast_buffer"), path + "/cast_buffer");
            if (value.contains("patch_pins")) s.patch_pins = bytes(value.at("patch_pins"), path + "/patch_pins");
        } else if (op == "pin" || op == "unpin") {
            s.kind = op == "pin" ? StepKind::pin : StepKind::unpin;
            s.bytes = bytes(field(value, "bytes", path), path + "/bytes");
        } else if (op == "await_free_below") {
            s.kind = StepKind::await_free_below;
            s.bytes = bytes(field(value, "bytes", path), path + "/bytes");
            s.ms = milliseconds(field(value, "ms", path), path + "/ms");
        } else {
            fail(path + "/op", "load_model, compute, pin, unpin, drop_model or await_free_below", json(op));
        }
        return s;
    }
};

}  // namespace

PackDescription load_pack_description(const std::string& path) {
    const Reader reader{path};
    const json document = read_json_file(path);  // throws JsonFileError, a std::runtime_error
    if (!document.is_object()) reader.fail("/", "an object with \"nodes\"", document);
    PackDescription pack;
    for (const auto& [key, value] : document.items()) {
        if (key == "nodes") continue;
        if (key == "max_pinned") {
            pack.max_pinned_bytes = reader.bytes(value, "/max_pinned");
            continue;
        }
        if (key == "node_boundary_release") {
            if (!value.is_boolean()) reader.fail("/node_boundary_release", "true or false", value);
            pack.node_boundary_release = value.get<bool>();
            continue;
        }
        reader.fail("/" + key, "one of nodes, max_pinned, node_boundary_release", json(key));
    }
    const json& nodes = reader.field(document, "nodes", "");
    if (!nodes.is_object() || nodes.empty()) reader.fail("/nodes", "an object of named nodes", nodes);
    for (const auto& [name, steps] : nodes.items()) {
        const std::string node_path = "/nodes/" + name;
        if (name.size() >= kNodeNameBytes) reader.fail(node_path, "a node name under 64 characters", json(name));
        if (!steps.is_array() || steps.empty()) reader.fail(node_path, "a non-empty array of steps", steps);
        auto& list = pack.nodes[name];
        for (std::size_t i = 0; i < steps.size(); ++i) list.push_back(reader.step(steps[i], node_path + "/" + std::to_string(i)));
    }
    return pack;
}

}  // namespace comfy::worker
