// A Python pack in the sandbox (docs/SECURITY.md, "A sandboxed Python pack"): its worker
// needs its pack folder, the ComfyUI checkout, its interpreter's venv, the supervisor's
// package and library, and the sandbox hides /tmp behind an empty folder of its own. A
// pack whose folder, checkout and venv all lie under /tmp still starts, describes its nodes
// and answers the host's calls (tests/host/bridge_checks.py), each shown read-only.
#include <catch2/catch.hpp>

#include "tests/python/bridge_checks_run.hpp"
#include "tests/support/sandbox_skip.hpp"
#include "tests/support/supervisor_process.hpp"

#include <filesystem>

using namespace comfy;
using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;
namespace fs = std::filesystem;

TEST_CASE("a sandboxed Python pack whose pack, checkout and venv lie under /tmp starts and answers calls") {
    SKIP_WITHOUT_BWRAP();
    const TempFolder folder("sandboxed-pack", "/tmp");  // what the sandbox hides, whatever $TMPDIR says
    const fs::path pack = folder.path() / "bridge_pack", checkout = folder.path() / "comfyui";
    const fs::path venv = folder.path() / "venv", work = folder.path() / "work";
    fs::copy(std::string(TEST_PACKS) + "/bridge_pack", pack, fs::copy_options::recursive);
    fs::copy(FAKE_COMFYUI, checkout, fs::copy_options::recursive);
    fs::create_directories(work);
    // A venv of the test's interpreter, torch from its system site-packages: its python is a
    // link to that interpreter, which lies outside /tmp.
    const auto made = run_and_capture(std::string(PYTHON3_PATH) + " -m venv --without-pip --system-site-packages '" +
                                      venv.string() + "' 2>&1");
    INFO(made.output);
    REQUIRE(made.status == 0);

    json bridge = python_pack_of("bridge", pack.string());
    bridge["python"]["comfyui"] = checkout.string();
    bridge["python"]["interpreter"] = (venv / "bin" / "python").string();
    bridge["working_directory"] = work.string();  // writable, and holds none of the pack's files
    bridge["sandbox"] = json::object();
    const auto log = run_checks({"interfaces", "values"}, json::array({bridge}));
    CHECK_THAT(log, Contains("bridge: pack_worker: bridge_pack: "));
    CHECK(count_of(log, "bridge: spawned pid") == 1);  // no life lost
    reap_orphans();
}
