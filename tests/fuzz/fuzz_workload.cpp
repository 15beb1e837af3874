// libFuzzer target: the workload loader on any text, against a config of two packs.
// Beyond never crashing, a refused workload is refused with one line naming the file.

#include "supervisor/config/workload_file.hpp"
#include "tests/fuzz/fuzz_check.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace comfy::supervisor;
    static const std::string kFile = "/nonexistent/comfy-fuzz/workload.json";
    static const Config config = [] {
        Config packs;
        packs.source = "/nonexistent/comfy-fuzz/config.json";
        packs.packs.resize(2);
        packs.packs[0].name = "sdxl";
        packs.packs[1].name = "video";
        return packs;
    }();
    try {
        load_workload_text(std::string_view(reinterpret_cast<const char*>(data), size), kFile, config);
    } catch (const ConfigError& error) {
        comfy::fuzz::check_one_line(error.what(), kFile + ": ");
    }
    return 0;
}
