// libFuzzer target: the config loader on any text. Beyond never crashing, hanging or
// allocating without bound, a refused config is refused with one line naming the file.

#include "supervisor/config/config.hpp"
#include "tests/fuzz/fuzz_check.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // Relative paths in the text start from this file's folder, which need not exist.
    static const std::string kFile = "/nonexistent/comfy-fuzz/config.json";
    try {
        comfy::supervisor::load_config_text(std::string_view(reinterpret_cast<const char*>(data), size), kFile);
    } catch (const comfy::supervisor::ConfigError& error) {
        comfy::fuzz::check_one_line(error.what(), kFile + ": ");
    }
    return 0;
}
