"""A LoRA a pack loads over a MODEL it patched (docs/PACKS.md, "Replicas"; tests/packs/
model_pack/lora_nodes.py), a check of bridge_checks.py registered with remote_checks.py's:

    remote-lora-over-patched  the pack's clone of its replica, patched, with a LoRA of its
                              own loaded by upstream's load_lora_for_models (upstream's
                              adapter objects as its weight patches); the host's KSampler
                              samples it in the pack, whose load has the host apply the
                              adapters (they cross by value), bit-equal to one process and
                              otherwise than without the LoRA
"""

import sys

from comfy_supervisor.bridge.remote import link_of
from remote_checks import expect, expect_sampled_as_one_process, graph, node, pack

_checks = sys.modules["__main__"]  # bridge_checks: say()
KEY = "diffusion_model.proj_in.weight"


def check_lora_over_patched():
    model, _, _, positive, negative, latent = graph()
    (loaded,) = node("LoraOverPatched").run(model=model, key=KEY, strength=0.8)
    expect(link_of(loaded) is not None and link_of(loaded).type_name.endswith(".ReplicaPatcher"),
           f"the MODEL with the LoRA is {loaded!r}, not the pack's clone of its replica")
    (without,) = node("PatchModel").patch(model=model, scale=1.05)
    one_process = pack().lora_nodes.LoraOverPatched().run(model, KEY, 0.8)[0]
    expect_sampled_as_one_process(loaded, one_process, without, positive, negative, latent)
    _checks.say("remote-lora-over-patched: the pack's LoRA over its patched clone sampled as one process")


CHECKS = {"remote-lora-over-patched": check_lora_over_patched}
