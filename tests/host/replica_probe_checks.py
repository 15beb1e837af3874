"""The hostile pack's probes of its replica of the host's MODEL (tests/packs/hostile_pack/
replicas.py; docs/SECURITY.md, "Replicas"), checks of bridge_checks.py registered with
remote_checks.py's (tests/python/remote_objects_test.cpp):

    remote-replica-uses    the replica's uses of the host ("replica", "replica_mirror",
                           "load_replica") written by hand: weight patches that are not data
                           (the pack's function, object or torch module in any field), on a
                           weight the model lacks, malformed, too many; each use on the
                           BaseModel, the CLIP's patcher and an id never handed over, a VAE's
                           and a CLIP's load with a patch of a weight it lacks, a CLIP's load
                           with patches that are not data: each refused in one line by its
                           guard,
                           the host's weights, patches and loaded models unchanged, no clone
                           held for the pack
    remote-replica-writes  the replica's weights written by the pack (in place, .data, the
                           mapping's bytes, state_dict, a parameter replaced, a tensor the host
                           answered): its own forward changes, the host's weights and samples
                           do not; kept across the host's eviction to a later call, the
                           replica is mapped again and computes as the host does
    remote-replica-recipe  what the host's recipe hands a pack: plain values, devices, dtypes
                           and enums, nothing callable, its object patches the very proxies
                           reading object_patches gives; a MODEL whose object patches hold a
                           callable no pack is handed has its recipe refused in one line, and
                           the callable is never run
    remote-replica-vae-recipe  what the host's recipe of a VAE's replica hands a pack: plain
                           values, devices and dtypes only, nothing callable or remote
    remote-replica-vae-writes  the VAE replica's weights written by the pack (as
                           remote-replica-writes): its own decode changes, the host's weights
                           and decode do not
    remote-replica-clip-recipe, remote-replica-clip-writes  the same of a CLIP's replica: its
                           recipe plain values only; its text encoder's weights written by the
                           pack change its own encode, not the host's weights or encode
"""

import json
import os
import shutil
import sys
import tempfile

import comfy.model_management as mm
import torch
from comfy_supervisor.crossing.replicas import owner as replica_owner
from mirror_checks import weights

_checks = sys.modules["__main__"]  # bridge_checks: node(), link(), same(), expect(), raises(), host
KEY = "diffusion_model.proj_in.weight"

# Each probe of ProbeReplicaUses, and what its refusal says: the guard meant for it refused it.
REFUSALS = {
    "a function of the pack's as a patch's function": "not tensors and numbers",
    "an object of the pack's as a patch's value": "not tensors and numbers",
    "a torch module of the pack's as a patch's value": "not tensors and numbers",
    "a function of the pack's as a patch's strength": "strengths or offset",
    "an object of the pack's as a patch's strength_model": "strengths or offset",
    "a tensor as a patch's strength": "strengths or offset",
    "a function of the pack's as a patch's offset": "strengths or offset",
    "an offset that is not three numbers": "strengths or offset",
    "a list as a patch's value (upstream calls its head)": "not tensors and numbers",
    "a value nested deeper than data goes": "not tensors and numbers",
    "no value (upstream takes its length)": "not tensors and numbers",
    "a weight the host's model has none of": "which the host's MODEL has no weight of",
    "a weight named by a tuple": "which the host's MODEL has no weight of",
    "an entry of four fields": "are not upstream's (strength, value",
    "an entry that is not a list": "are not upstream's (strength, value",
    "entries that are not a list": "are not upstream's (strength, value",
    "patches that are not a dict": "are not a dict of",
    "a dict of more weights than any model has": "are not a dict of at most",
    "replica of the model's BaseModel": "a DIFFUSION_MODEL has no replica here",
    "replica of the CLIP's patcher": "a replica is built of upstream's comfy.model_base classes",
    "replica of an id it was never handed": "was handed over here",
    "replica_mirror of the model's BaseModel": "a DIFFUSION_MODEL has no replica here",
    "replica_mirror of the CLIP's patcher": "a replica is built of upstream's comfy.model_base classes",
    "replica_mirror of an id it was never handed": "was handed over here",
    "load_replica of the model's BaseModel": "a DIFFUSION_MODEL has no replica here",
    "load_replica of the CLIP's patcher": "a replica is built of upstream's comfy.model_base classes",
    "load_replica of an id it was never handed": "was handed over here",
    "load_replica of a VAE, on a weight it has none of": "which the host's VAE has no weight of",
    "a function of the pack's as a CLIP patch's function": "not tensors and numbers",
    "an object of the pack's as a CLIP patch's value": "not tensors and numbers",
    "a torch module of the pack's as a CLIP patch's value": "not tensors and numbers",
    "load_replica of a CLIP, on a weight it has none of": "which the host's CLIP has no weight of",
    "the use 'closed' of the host's MODEL": "a pack may not",
}


def remote():
    return sys.modules["remote_checks"]


def expect(condition, why):
    _checks.expect(condition, why)


def unchanged(before, module):
    return all(_checks.same(before[name], tensor) for name, tensor in module.state_dict().items())


def check_uses():
    model, clip, vae = remote().graph()[:3]
    before, patches = weights(model.model), repr(model.patches)
    loaded = [entry.model for entry in mm.current_loaded_models]
    (answers,) = _checks.node("ProbeReplicaUses", "hostile").run(model=model, clip=clip, vae=vae, key=KEY)
    answers = json.loads(answers)
    wrong = [f"{what}: answered {outcome} {kind} {str(message)[:200]!r}" for what, outcome, kind, message in answers
             if not (outcome == "error" and kind == "RemoteError" and "\n" not in str(message) and
                     REFUSALS.get(what, "\0") in str(message))]
    expect(not wrong, "; ".join(wrong))
    expect(len(answers) == len(REFUSALS), f"{len(answers)} probes answered, not {len(REFUSALS)}")
    expect(unchanged(before, model.model) and repr(model.patches) == patches, "a probe changed the host's MODEL")
    now = [entry.model for entry in mm.current_loaded_models]
    expect(len(now) == len(loaded) and all(a is b for a, b in zip(now, loaded)),
           f"a probe changed the host's loaded models: {len(loaded)} before, {len(now)} after")
    held = replica_owner._held.get(_checks.link("hostile").session.remote, {})
    expect(not held, f"the host holds {len(held)} clones loaded for the pack")
    expect(_checks.node("Add", "hostile").run(a=1, b=2) == (3,), "the pack's next call")
    _checks.say("remote-replica-uses: " + "; ".join(message for _, _, _, message in answers[:3]))


def check_writes():
    model, _, _, positive, negative, latent = remote().graph()
    unet = model.model.diffusion_model
    before, host_out = weights(unet), remote().pack().mirror_forward(unet)
    sampled = remote().ksample(model, positive, negative, latent)
    mm.load_models_gpu([model])  # loaded, so that its eviction below revokes what the pack maps of it
    outcomes, pack_before, pack_after = _checks.node("WriteReplica", "hostile").run(model=model)
    for what, outcome in json.loads(outcomes):
        expect(outcome == "written", f"the pack's write {what}: {outcome}")
    expect(_checks.same(pack_before["samples"], host_out), "the replica computes otherwise than the host's model")
    expect(not _checks.same(pack_after["samples"], host_out), "the pack's writes changed nothing of its replica")
    expect(unchanged(before, unet), "the pack's writes changed the host's weights")
    expect(_checks.same(remote().ksample(model, positive, negative, latent), sampled),
           "the host samples otherwise after the pack's writes")
    mm.unload_all_models()  # the host's eviction: the replica the pack kept is revoked
    (kept,) = _checks.node("UseKeptReplica", "hostile").run()
    expect(_checks.same(kept["samples"], remote().pack().mirror_forward(unet)),
           "the kept replica, after the host's eviction, computes otherwise than the host's model")
    expect(unchanged(before, unet), "the host's weights changed")


class CanaryWriter:
    """A host object of no kind: its bound method, as an object patch, is what no pack is handed."""

    def __init__(self, path):
        self.path = path

    def write(self, *args, **kwargs):
        with open(self.path, "w") as canary:
            canary.write(str(os.getpid()))


def host_forward(*args, **kwargs):
    """A function of the host's as an object patch: a pack gets it as a remote callable."""
    return None


def check_recipe():
    model = remote().graph()[0]
    patched = model.clone()
    patched.add_object_patch("model_sampling", model.model.model_sampling)
    patched.add_object_patch("diffusion_model.forward", host_forward)
    folder = tempfile.mkdtemp(prefix="comfy-recipe-")
    canary = os.path.join(folder, "canary")
    withheld = model.clone()
    withheld.add_object_patch("diffusion_model.forward", CanaryWriter(canary).write)
    try:
        (answer,) = _checks.node("ReadRecipe", "hostile").run(model=patched, withheld=withheld)
        written = os.path.exists(canary)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    answer = json.loads(answer)
    patches = {}
    for path, kind, is_callable, remote_kind in answer["leaves"]:
        if path.startswith("recipe.object_patches."):
            patches[path.removeprefix("recipe.object_patches.")] = remote_kind
        else:
            expect(kind == "plain" and not is_callable and remote_kind is None,
                   f"the recipe hands the pack {path}: a {kind}, callable {is_callable}, remote {remote_kind}")
    expect(patches == {"model_sampling": "MODEL_SAMPLING", "diffusion_model.forward": "CALLABLE"},
           f"the recipe's object patches: {patches}")
    expect(answer["same_as_read"], "the recipe's object patches are not what reading object_patches gives")
    outcome, kind, message = answer["withheld"]
    expect(outcome == "error" and kind == "RemoteError" and "\n" not in message and
           "is never handed to a pack" in message, f"the recipe of a MODEL with a withheld patch: {answer['withheld']}")
    expect(answer["withheld_arrived_as"] == "proxy", "a MODEL whose recipe is refused arrived as a replica")
    expect(not written, "the host's object patch no pack is handed was run")
    _checks.say("remote-replica-recipe: " + message)


def check_vae_recipe():
    expect_plain_recipe("VAE", "ReadVaeRecipe", vae=remote().graph()[2])


def expect_plain_recipe(kind, node, **inputs):
    """The hostile pack's `node` read its replica's recipe of the host's `kind`: every leaf a
    plain value."""
    (answer,) = _checks.node(node, "hostile").run(**inputs)
    answer = json.loads(answer)
    expect(answer["arrived_as"] == kind, f"the host's {kind} arrived as a {answer['arrived_as']}, not a replica")
    wrong = [leaf for leaf in answer["leaves"] if leaf[1:] != ["plain", False, None]]
    expect(answer["leaves"] and not wrong, f"the {kind}'s recipe hands the pack {wrong[:5]}")
    _checks.say(f"remote-replica-{kind.lower()}-recipe: {len(answer['leaves'])} leaves, each a plain value")


def check_vae_writes():
    vae = remote().graph()[2]
    latent = {"samples": torch.randn(1, 4, 4, 4, generator=torch.Generator().manual_seed(12))}
    before, decoded = weights(vae.first_stage_model), vae.decode(latent["samples"])
    outcomes, pack_before, pack_after = _checks.node("WriteVaeReplica", "hostile").run(vae=vae, latent=latent)
    for what, outcome in json.loads(outcomes):
        expect(outcome == "written", f"the pack's write {what}: {outcome}")
    expect(_checks.same(pack_before, decoded), "the VAE replica decodes otherwise than the host's VAE")
    expect(not _checks.same(pack_after, decoded), "the pack's writes changed nothing of its replica")
    expect(unchanged(before, vae.first_stage_model), "the pack's writes changed the host's VAE weights")
    expect(_checks.same(vae.decode(latent["samples"]), decoded), "the host decodes otherwise after the pack's writes")


def check_clip_recipe():
    expect_plain_recipe("CLIP", "ReadClipRecipe", clip=remote().graph()[1])


def check_clip_writes():
    clip = remote().graph()[1]
    before, encoded = weights(clip.cond_stage_model), clip.encode_from_tokens(clip.tokenize("a red fox"))
    outcomes, pack_before, pack_after = _checks.node("WriteClipReplica", "hostile").run(clip=clip, text="a red fox")
    for what, outcome in json.loads(outcomes):
        expect(outcome == "written", f"the pack's write {what}: {outcome}")
    expect(_checks.same(pack_before["samples"], encoded), "the CLIP replica encodes otherwise than the host's CLIP")
    expect(not _checks.same(pack_after["samples"], encoded), "the pack's writes changed nothing of its replica")
    expect(unchanged(before, clip.cond_stage_model), "the pack's writes changed the host's CLIP weights")
    expect(_checks.same(clip.encode_from_tokens(clip.tokenize("a red fox")), encoded),
           "the host encodes otherwise after the pack's writes")


CHECKS = {"remote-replica-uses": check_uses, "remote-replica-writes": check_writes,
          "remote-replica-recipe": check_recipe, "remote-replica-vae-recipe": check_vae_recipe,
          "remote-replica-vae-writes": check_vae_writes, "remote-replica-clip-recipe": check_clip_recipe,
          "remote-replica-clip-writes": check_clip_writes}
