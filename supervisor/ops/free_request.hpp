#pragma once
// The body of POST /free, read as ComfyUI's server reads its own: `unload_models` and
// `free_memory`, both false when absent. As in ComfyUI's main loop, `unload_models`
// defaults to `free_memory`'s value, so free_memory alone unloads the models too.
// Unknown keys are ignored, as upstream ignores them.

#include <string>
#include <string_view>
#include <variant>

namespace comfy::supervisor {

struct FreeRequest {
    bool unload_models = false;  // detach every model in the ledger (unload_all_models)
    bool free_memory = false;    // and a full release of every participant (the executor's reset)

    bool nothing() const noexcept { return !unload_models && !free_memory; }
};

// The request, or one line saying why the body is refused (not JSON, not an object, a
// value that is not a boolean). An empty body is `{}`.
std::variant<FreeRequest, std::string> parse_free_request(std::string_view body);

}  // namespace comfy::supervisor
