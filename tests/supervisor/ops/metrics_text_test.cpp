// The metrics' text as Prometheus reads it: label values escaped whatever a name holds, and
// one series per model of the ledger under its owner's pack, its id and its name.
#include <catch2/catch.hpp>

#include "supervisor/ops/metrics_text.hpp"

using namespace comfy;
using namespace comfy::supervisor;
using Catch::Matchers::Contains;

TEST_CASE("a label's value has its backslashes, double quotes and line feeds escaped, and nothing else") {
    CHECK(label_value("SDXL (sd_xl_base_1.0.safetensors)") == "SDXL (sd_xl_base_1.0.safetensors)");
    CHECK(label_value(R"(a "quoted" \ name)") == R"(a \"quoted\" \\ name)");
    CHECK(label_value("two\nlines") == R"(two\nlines)");
    CHECK(label_value("").empty());
}

TEST_CASE("each model of the ledger is a series of its pack, its id and its name, and an unknown figure has none") {
    MetricsInput in;
    in.models.push_back({"sdxl", 3, "SDXL (sd_xl_base_1.0.safetensors)", 6 * kGiB, 4 * kGiB});
    in.models.push_back({"odd", 4, R"(say "hi" \ bye)", kGiB, std::nullopt});
    in.models.push_back({"odd", 5, "", kGiB, kGiB});
    const auto text = metrics_text(in);
    CHECK_THAT(text, Contains("comfy_model_total_bytes{pack=\"sdxl\",model_id=\"3\",model=\"SDXL "
                              "(sd_xl_base_1.0.safetensors)\"} 6442450944\n"));
    CHECK_THAT(text, Contains("comfy_model_loaded_bytes{pack=\"sdxl\",model_id=\"3\",model=\"SDXL "
                              "(sd_xl_base_1.0.safetensors)\"} 4294967296\n"));
    CHECK_THAT(text,
               Contains(R"(comfy_model_total_bytes{pack="odd",model_id="4",model="say \"hi\" \\ bye"} 1073741824)"));
    CHECK_THAT(text, !Contains(R"(comfy_model_loaded_bytes{pack="odd",model_id="4")"));  // not reported yet: no sample
    CHECK_THAT(text, Contains(R"(comfy_model_loaded_bytes{pack="odd",model_id="5",model=""} 1073741824)"));
}
