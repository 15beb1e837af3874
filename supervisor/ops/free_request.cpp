#include "supervisor/ops/free_request.hpp"

#include <nlohmann/json.hpp>

namespace comfy::supervisor {

std::variant<FreeRequest, std::string> parse_free_request(std::string_view body) {
    if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return FreeRequest{};
    const auto document = nlohmann::json::parse(body, nullptr, false);
    if (document.is_discarded()) return std::string("the body is not JSON; send {\"unload_models\": true} or {\"free_memory\": true}");
    if (!document.is_object()) {
        return std::string("the body is JSON but not an object; send {\"unload_models\": true} or {\"free_memory\": true}");
    }
    FreeRequest request;
    for (const auto& [key, flag] : {std::pair{"unload_models", &request.unload_models},
                                    std::pair{"free_memory", &request.free_memory}}) {
        const auto found = document.find(key);
        if (found == document.end()) continue;
        if (!found->is_boolean()) {
            return std::string(key) + " must be true or false, found " + found->dump().substr(0, 60);
        }
        *flag = found->get<bool>();
    }
    // ComfyUI's main loop: flags.get("unload_models", free_memory), where the server sets
    // the unload_models flag only when it is true.
    request.unload_models = request.unload_models || request.free_memory;
    return request;
}

}  // namespace comfy::supervisor
