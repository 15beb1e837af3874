// ComfyUI's objects between the host and a pack's worker, end to end (docs/PACKS.md, "Remote
// objects"): a live supervisor, the host (tests/host/bridge_checks.py and remote_checks.py
// over our model of upstream) and tests/packs/model_pack in a worker of its own. Each graph's
// outputs are compared bit for bit with the same graph with the pack imported into the
// host's process.
#include <catch2/catch.hpp>

#include "tests/python/bridge_checks_run.hpp"

using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

TEST_CASE("the host's MODEL, CLIP, VAE and CONTROL_NET work in a pack's nodes, and the pack's MODEL in the host's KSampler") {
    run_checks({"remote-patch", "remote-options", "remote-options-in-place", "remote-noise", "remote-clip-vae",
                "remote-control",
                "remote-upscale", "remote-conds",
                "remote-cond-objects", "remote-pack-model", "remote-forwarded", "remote-released"},
               json::array({python_pack("model", "model_pack")}));
}

TEST_CASE("a pack's MODEL the host holds when its worker dies raises one line, and the pack's next life runs") {
    const auto log = run_checks({"remote-dead-owner"}, json::array({python_pack("model", "model_pack")}));
    CHECK_THAT(log, Contains("(generation 1) killed by SIGKILL"));
}

TEST_CASE("a pack's proxy of a host object kept across a host restart raises one line, and reaches no object of the new life") {
    const auto log = run_checks({"remote-host-restart"}, json::array({python_pack("model", "model_pack")}));
    CHECK_THAT(log, Contains("remote-host-restart: the pack keeps the host's MODEL; this life ends"));
    CHECK_THAT(log, Contains("(generation 1) killed by SIGKILL"));
}

TEST_CASE("a hostile pack asking for host objects it was not handed, or uses off the list, gets an error and nothing else") {
    run_checks({"remote-hostile"}, json::array({python_pack("hostile", "hostile_pack")}));
}

TEST_CASE("a pack's node runs the host's diffusion model and CLIP vision model itself, mapped from the host's weights, counted once and revoked by an eviction") {
    run_checks({"mirror-forward", "mirror-clip-vision", "mirror-by-name", "mirror-writes", "mirror-tamper", "mirror-ledger", "mirror-evicted", "mirror-dead-owner"},
               json::array({python_pack("model", "model_pack")}));
}
