// The journal's entry for a log line: the line as MESSAGE, its priority and identifier,
// then what the line is about as COMFY_ fields, so that `journalctl COMFY_PACK=NAME` finds
// it; a field the line is not about is left out, not written empty.
#include <catch2/catch.hpp>

#include "supervisor/ops/log/journal_fields.hpp"

using namespace comfy::supervisor;
using Fields = std::vector<std::string>;

TEST_CASE("a memory decision's entry carries its pack, slot, generation, model, model id and event kind") {
    LogFields about;
    about.pack = "impact";
    about.slot = 2;
    about.generation = 7;
    about.model = "SDXL (sd_xl_base_1.0.safetensors)";
    about.model_id = 3;
    about.event = "admissions";
    const std::string line = "comfy-supervisor [  12.345] memory: sdxl (slot 1) needs 8.0 GiB: asking impact ...";
    CHECK(journal_fields(6, line, "comfy-supervisor", about) ==
          Fields{"MESSAGE=" + line, "PRIORITY=6", "SYSLOG_IDENTIFIER=comfy-supervisor", "COMFY_PACK=impact",
                 "COMFY_SLOT=2", "COMFY_GENERATION=7", "COMFY_MODEL=SDXL (sd_xl_base_1.0.safetensors)",
                 "COMFY_MODEL_ID=3", "COMFY_EVENT=admissions"});
}

TEST_CASE("a line about no one has no COMFY_ field, and an empty message is sent all the same") {
    CHECK(journal_fields(4, "comfy-supervisor [   1.000] segment removed", "comfy-supervisor", {}) ==
          Fields{"MESSAGE=comfy-supervisor [   1.000] segment removed", "PRIORITY=4",
                 "SYSLOG_IDENTIFIER=comfy-supervisor"});
    LogFields child;
    child.pack = "host";
    child.slot = 0;
    child.generation = 1;
    CHECK(journal_fields(6, "", "comfy-supervisor", child) ==
          Fields{"MESSAGE=", "PRIORITY=6", "SYSLOG_IDENTIFIER=comfy-supervisor", "COMFY_PACK=host", "COMFY_SLOT=0",
                 "COMFY_GENERATION=1"});
}
