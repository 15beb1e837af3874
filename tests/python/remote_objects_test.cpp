// ComfyUI's objects between the host and a pack's worker, end to end (docs/PACKS.md, "Remote
// objects"): a live supervisor, the host (tests/host/bridge_checks.py and remote_checks.py
// over our model of upstream) and tests/packs/model_pack in a worker of its own. Each graph's
// outputs are compared bit for bit with the same graph with the pack imported into the
// host's process.
#include <catch2/catch.hpp>

#include "tests/python/bridge_checks_run.hpp"
#include "tests/support/sandbox_skip.hpp"

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

TEST_CASE("the host's VAE and CLIP_VISION arrive in a pack as upstream's classes over the host's weights mapped, compute bit-equal, count once, map again after an eviction, and are let go once unused") {
    run_checks({"remote-replica-vae", "remote-replica-clip-vision", "remote-released"},
               json::array({python_pack("model", "model_pack")}));
}

TEST_CASE("the host's CLIP arrives in a pack as upstream's CLIP over the host's weights mapped, encodes bit-equal with the pack's weight patches too, counts once, and maps again after an eviction") {
    run_checks({"remote-replica-clip"}, json::array({python_pack("model", "model_pack")}));
}

TEST_CASE("a MODEL one pack patched is patched again by another pack's node, and the host's KSampler samples it as one process") {
    run_checks({"remote-two-packs"},
               json::array({python_pack("model", "model_pack"), python_pack("second", "model_pack")}));
}

TEST_CASE("a LoRA a pack loads over a MODEL it patched is applied by the host's load, and the host's KSampler samples it as one process") {
    run_checks({"remote-lora-over-patched"}, json::array({python_pack("model", "model_pack")}));
}

TEST_CASE("a refusal that a pack's clean-up code masked is what its node's error says first") {
    run_checks({"remote-masked-refusal"}, json::array({python_pack("model", "model_pack")}));
}

TEST_CASE("a pack's MODEL the host holds when its worker dies raises one line, and the pack's next life runs") {
    const auto log = run_checks({"remote-dead-owner"}, json::array({python_pack("model", "model_pack")}));
    CHECK_THAT(log, Contains("(generation 1) killed by SIGKILL"));
}

TEST_CASE("a pack's replica of a host MODEL kept across a host restart raises one line where it needs the host, and reaches no object of the new life") {
    const auto log = run_checks({"remote-host-restart"}, json::array({python_pack("model", "model_pack")}));
    CHECK_THAT(log, Contains("remote-host-restart: the pack keeps the host's MODEL; this life ends"));
    CHECK_THAT(log, Contains("(generation 1) killed by SIGKILL"));
}

TEST_CASE("a hostile pack asking for host objects it was not handed, or uses off the list, gets an error and nothing else") {
    run_checks({"remote-hostile"}, json::array({python_pack("hostile", "hostile_pack")}));
}

TEST_CASE("a hostile pack's replica reaches no host object beyond it, and its writes and weight patches leave the host's model as it was") {
    run_checks({"remote-replica-uses", "remote-replica-writes", "remote-replica-recipe"},
               json::array({python_pack("hostile", "hostile_pack")}));
}

TEST_CASE("a hostile pack's VAE replica holds plain values from the host, and its writes to the replica's weights leave the host's VAE as it was") {
    run_checks({"remote-replica-vae-recipe", "remote-replica-vae-writes"}, json::array({python_pack("hostile", "hostile_pack")}));
}

TEST_CASE("a hostile pack's CLIP replica holds plain values from the host, and its writes to the replica's weights leave the host's CLIP as it was") {
    run_checks({"remote-replica-clip-recipe", "remote-replica-clip-writes"},
               json::array({python_pack("hostile", "hostile_pack")}));
}

// The host's log says each walk once with the pack's name, and a loop of 200 more refusals
// is a line or so more (one a 10 s), not 200. The first line is the first refusal: the
// walk's, or the MODEL with a host callable in its model_options refused to its replica as
// it arrives (it then crosses as a proxy).
static void check_walk_logged(const std::string& log) {
    const std::string refused = "comfy-supervisor: pack hostile: refused its use of the host's objects: ";
    CHECK_THAT(log, Contains(refused + "get_model_object('__class__.__init__.__builtins__.get') of the host's MODEL: "
                                       "a path is public names and indices only, no private or dunder name") ||
                        Contains(refused + "a bound method remote_checks.CanaryWriter.write (of no object whose "
                                           "kind lists it) is never handed to a pack"));
    CHECK(count_of(log, "refused its use of the host's objects") <= 5);
}

TEST_CASE("a hostile pack's walk of dotted names, object patches and callables to the host's builtins is refused in one line, logged, and changes nothing") {
    check_walk_logged(run_checks({"remote-walk"}, json::array({python_pack("hostile", "hostile_pack")})));
}

TEST_CASE("a sandboxed hostile pack's walk to the host's builtins is refused the same") {
    SKIP_WITHOUT_BWRAP();
    json hostile = python_pack("hostile", "hostile_pack");
    hostile["sandbox"] = json::object();
    check_walk_logged(run_checks({"remote-walk"}, json::array({hostile})));
    reap_orphans();
}

TEST_CASE("a pack's node runs the host's diffusion model and CLIP vision model itself, mapped from the host's weights, counted once and revoked by an eviction") {
    run_checks({"mirror-forward", "mirror-clip-vision", "mirror-by-name", "mirror-writes", "mirror-tamper", "mirror-ledger", "mirror-evicted", "mirror-dead-owner"},
               json::array({python_pack("model", "model_pack")}));
}
