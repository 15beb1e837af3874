"""The remote objects' checks of bridge_checks.py (tests/python/remote_objects_test.cpp): ComfyUI's
objects crossing both ways between the host (our model of upstream) and
tests/packs/model_pack as "model", each graph's outputs bit-equal to the same graph with the
pack imported into this process; and tests/packs/hostile_pack as "hostile" probing them.

    remote-patch    a host MODEL cloned and patched in the pack (an object patch, the pack's
                    attention patch and CFG function) comes back as the host's own clone,
                    and the host's KSampler calls the pack's functions in the worker each step
    remote-options  model_options read, changed in a copy and set back on a clone
    remote-options-in-place  model_options changed in place on a clone, as IPAdapter does
                    (a key set, a replacement found there changed, a key deeper down):
                    each change reaches the host's clone, sampled bit-equal to one process
    remote-noise    a host NOISE (random, and none) asked for a latent's noise and its seed
    remote-clip-vae a host CLIP's tokenize and encode, a host VAE's encode and decode
    remote-control  a host CONTROL_NET copied with its hint set into CONDITIONING, sampled
    remote-upscale  a host UPSCALE_MODEL moved, its scale read and called on an image in
                    the pack: bit-equal to one process
    remote-conds    upstream's comfy.conds values in a CONDITIONING's model_conds cross by
                    value both ways, each the receiver's own class, and sample the same
    remote-cond-objects  CONDITIONING holding a control net and hooks: the host's come back
                    as the host's own, the pack's stay in the worker, and both sample the same
    remote-pack-model  the pack's own MODEL sampled by the host's KSampler: each step's
                    forward in the worker; its load the pack's, in the ledger as the
                    pack's, a stand-in in the host's list and no proxy
    remote-forwarded  the pack loads the host's MODEL and samples it with upstream's
                    nodes.common_ksampler: both run in the host, as the host's
    remote-released the objects each side handed the other are let go once unused
    remote-dead-owner  the pack's MODEL, held by the host when its worker dies, raises one
                    line naming the pack and the object; the pack's next life runs
    remote-host-restart  the host's MODEL (its replica), kept by the pack beyond its node
                    when the host dies: in the host's next life (this check again) each use
                    of it that needs the host (a load, a forward over the host's weights)
                    raises one line naming the host's ended life, never reaching the new
                    life's object of the same id; the MODEL given now works
    remote-hostile  every use the hostile pack writes itself of what it was not handed, or
                    may not do, is an error and nothing else
    remote-walk     the hostile pack's walks past what it was handed (hostile_pack/walks.py):
                    dotted names through dunders and private names to the host's builtins,
                    object patches of the host's class, bound methods and what a returned
                    callable reaches, a host callable of no kind in model_options: each is
                    refused in one line, the canary the host's eval would write is never
                    written, and the host's objects and classes are unchanged
    remote-replica-*  the hostile pack's probes of its replica of the host's MODEL: its uses
                    of the host written by hand, its weights written, its recipe read
                    (replica_probe_checks.py); the host's VAE and CLIP_VISION as replicas
                    (replica_vae_vision_checks.py); the host's CLIP as a replica
                    (replica_clip_checks.py)
"""

import gc
import importlib.util
import json
import os
import shutil
import signal
import sys
import tempfile
import time

import comfy.conds
import comfy.controlnet
import comfy.hooks
import comfy.model_base
import comfy.model_management as mm
import comfy.model_patcher
import comfy.model_sampling
import nodes
import torch
from comfy_supervisor.bridge.remote import RemoteError, link_of
from comfy_supervisor.bridge.values import ValueCrossingError
from comfy_supervisor.host import proxy_nodes

HERE = os.path.dirname(os.path.abspath(__file__))
_checks = sys.modules["__main__"]  # bridge_checks: node(), link(), same(), expect(), raises(), host
_pack = None


def pack():
    """tests/packs/model_pack imported into this process: the graph in one process."""
    global _pack
    if _pack is None:
        folder = os.path.join(HERE, "..", "packs", "model_pack")
        # A package, as upstream loads a custom node: its relative imports find its modules.
        spec = importlib.util.spec_from_file_location("model_pack_in_host", os.path.join(folder, "__init__.py"),
                                                      submodule_search_locations=[folder])
        _pack = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_pack)
    return _pack


def node(name):
    return _checks.node(name, "model")


def expect(condition, why):
    _checks.expect(condition, why)


def same(a, b):
    return _checks.same(a, b)


def graph():
    """What a prompt's first nodes make in the host: the models, two conditionings, a latent."""
    model, clip, vae = nodes.CheckpointLoaderSimple().load_checkpoint("tiny.safetensors")
    positive = nodes.CLIPTextEncode().encode(clip, "a cat on a mat")[0]
    negative = nodes.CLIPTextEncode().encode(clip, "")[0]
    return model, clip, vae, positive, negative, {"samples": torch.zeros(1, 4, 4, 4)}


def ksample(model, positive, negative, latent):
    return nodes.KSampler().sample(model, 7, 3, 7.5, "euler", "normal", positive, negative, latent)[0]["samples"]


def check_patch():
    model, _, _, positive, negative, latent = graph()
    (patched,) = node("PatchModel").patch(model=model, scale=1.05)
    # The pack patched a clone of its replica of the host's MODEL: the patched MODEL is the
    # pack's, and the host's KSampler given it samples in the pack, where its patches are.
    expect(link_of(patched) is not None and link_of(patched).type_name.endswith(".ReplicaPatcher"),
           f"the patched MODEL is {patched!r}, not the pack's clone of its replica")
    expect("patches" not in model.model_options["transformer_options"] and model.object_patches == {},
           "the original MODEL was patched")
    expect_sampled_as_one_process(patched, pack().PatchModel().patch(model, 1.05)[0], model, positive, negative,
                                  latent)


def expect_sampled_as_one_process(patched, in_one_process, model, positive, negative, latent):
    """The host's KSampler samples the isolated node's MODEL bit-equal to the one-process
    node's, and otherwise than the `model` both patched."""
    isolated = ksample(patched, positive, negative, latent)
    expect(same(isolated, ksample(in_one_process, positive, negative, latent)),
           "the samples differ from the same graph in one process")
    expect(not same(isolated, ksample(model, positive, negative, latent)), "the patches changed nothing")


def check_options():
    model = graph()[0]
    (patched,) = node("ReadModelOptions").read(model=model)
    expect(patched.model_options["transformer_options"].get("pack_seen") is True, "the options set back")
    expect("pack_seen" not in model.model_options["transformer_options"], "the original's options changed")


def check_options_in_place():
    model, _, _, positive, negative, latent = graph()
    (patched,) = node("ReplaceAttention").patch(model=model, scale=1.1)
    options = patched.model_options["transformer_options"]
    replacement = options.get("patches_replace", {}).get("attn2", {}).get(("middle", 0))
    expect(link_of(replacement) is not None and options.get("pack_replaced") is True,
           f"the pack's changes in place did not reach the host's clone: {options}")
    expect("patches_replace" not in model.model_options["transformer_options"], "the original MODEL was changed")
    expect_sampled_as_one_process(patched, pack().ReplaceAttention().patch(model, 1.1)[0], model, positive,
                                  negative, latent)


def check_noise():
    # Made by upstream's nodes as upstream loads them: under their file's path, not by name.
    nodes.init_extra_nodes()
    random_noise, no_noise = nodes.NODE_CLASS_MAPPINGS["RandomNoise"], nodes.NODE_CLASS_MAPPINGS["DisableNoise"]
    latent = {"samples": torch.zeros(1, 4, 4, 4)}
    for (noise,) in (random_noise().get_noise(11), no_noise().get_noise()):
        isolated, seed = node("NoiseLatent").noise(noise=noise, latent=latent)
        expected, expected_seed = pack().NoiseLatent().noise(noise, latent)
        expect(same(isolated["samples"], expected["samples"]) and seed == expected_seed,
               f"{type(noise).__name__}'s noise or seed differs from one process")


def check_clip_vae():
    _, clip, vae, _, _, _ = graph()
    (isolated,) = node("EncodeText").encode(clip=clip, text="a red fox")
    expect(same(isolated, pack().EncodeText().encode(clip, "a red fox")[0]), "CLIP's conditioning differs")
    image = torch.rand(1, 32, 32, 3, generator=torch.Generator().manual_seed(5))
    isolated = node("VaeRoundTrip").round_trip(vae=vae, image=image)
    expect(same(isolated, pack().VaeRoundTrip().round_trip(vae, image)), "the VAE's round trip differs")


def check_upscale():
    import spandrel
    generator = torch.Generator().manual_seed(8)
    upscaler = torch.nn.Sequential(torch.nn.Conv2d(3, 12, 3, padding=1), torch.nn.PixelShuffle(2))
    with torch.no_grad():
        for parameter in upscaler.parameters():
            parameter.copy_(torch.rand(parameter.shape, generator=generator) - 0.5)
    upscale_model = spandrel.ImageModelDescriptor(upscaler, scale=2)
    image = torch.rand(1, 8, 8, 3, generator=generator)
    with torch.no_grad():
        isolated = node("UpscaleWithHost").upscale(upscale_model=upscale_model, image=image)
        expected = pack().UpscaleWithHost().upscale(upscale_model, image)
    expect(isolated[1] == 2.0 and tuple(isolated[0].shape) == (1, 16, 16, 3),
           f"the upscale read scale {isolated[1]} and made {tuple(isolated[0].shape)}")
    expect(same(isolated, expected), "the upscaled image differs from the same graph in one process")


def check_control():
    model, _, _, positive, negative, latent = graph()
    control = nodes.ControlNetLoader().load_controlnet("control.safetensors")[0]
    hint = torch.rand(1, 16, 16, 3, generator=torch.Generator().manual_seed(6))
    (conditioning,) = node("ApplyControl").apply(conditioning=positive, control_net=control, image=hint, strength=0.8)
    applied = conditioning[0][1]["control"]
    expect(type(applied) is comfy.controlnet.ControlNet and applied is not control and applied.strength == 0.8,
           f"the control net applied is {applied!r}, not the host's own copy")
    expected = pack().ApplyControl().apply(positive, control, hint, 0.8)[0]
    expect(same(ksample(model, conditioning, negative, latent), ksample(model, expected, negative, latent)),
           "the samples differ from the same graph in one process")


def same_values(a, b):
    """same(), with upstream's conditioning values compared by their class and their content."""
    if isinstance(a, comfy.conds.CONDRegular) or isinstance(b, comfy.conds.CONDRegular):
        return type(a) is type(b) and same_values(a.cond, b.cond)
    if isinstance(a, (list, tuple)) and type(a) is type(b):
        return len(a) == len(b) and all(same_values(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and type(a) is type(b):
        return list(a) == list(b) and all(same_values(a[k], b[k]) for k in a)
    return same(a, b)


def check_conds():
    model, _, _, positive, negative, latent = graph()
    cond, extra = positive[0]
    values = {"host_pooled": comfy.conds.CONDRegular(extra["pooled_output"]),
              "host_context": comfy.conds.CONDCrossAttn(cond),
              "host_latent": comfy.conds.CONDNoiseShape(torch.rand(1, 4, 4, 4, generator=torch.Generator().manual_seed(8))),
              "host_frames": comfy.conds.CONDConstant(2),
              "host_refs": comfy.conds.CONDList([cond[:, :3], cond[:, 3:]])}
    given = [[cond, {**extra, "model_conds": values}]]
    isolated, seen = node("CondValues").values(conditioning=given)
    expected, expected_seen = pack().CondValues().values(given)
    classes = ["CONDRegular", "CONDCrossAttn", "CONDNoiseShape", "CONDConstant", "CONDList"]
    expect(json.loads(seen) == json.loads(expected_seen) and [c for _, c, _ in json.loads(seen)] == classes,
           f"the pack read the host's values as {seen}, in one process {expected_seen}")
    made = isolated[0][1]["model_conds"]
    expect(all(link_of(value) is None and type(value) is getattr(comfy.conds, type(value).__name__)
               for value in made.values()) and [type(v).__name__ for v in made.values()] == classes * 2,
           f"the values that came back are {made!r}, not the host's own comfy.conds classes")
    expect(same_values(isolated, expected), "the values differ from the same graph in one process")
    expect(same(ksample(model, isolated, negative, latent), ksample(model, expected, negative, latent)),
           "the samples differ from the same graph in one process")


def check_cond_objects():
    model, _, _, positive, negative, latent = graph()
    hint = torch.rand(1, 16, 16, 3, generator=torch.Generator().manual_seed(9))
    control = nodes.ControlNetLoader().load_controlnet("control.safetensors")[0].copy()
    control = control.set_cond_hint(hint.movedim(-1, 1), 0.7)
    hooks = comfy.hooks.HookGroup()
    hooks.add(comfy.hooks.Hook(strength=0.5))
    given = [[positive[0][0], {**positive[0][1], "control": control, "hooks": hooks}]]
    (passed,) = node("PassConditioning").passed(conditioning=given)
    extra = passed[0][1]
    expect(extra["control"] is control and extra.get("pack_seen") is True,
           f"the host's control net came back as {extra['control']!r}, not as itself")
    combined = extra["hooks"]
    expect(type(combined) is comfy.hooks.HookGroup and combined is not hooks and
           [hook.strength for hook in combined.hooks] == [0.5],
           f"the hooks the pack combined are {combined!r}, not a HookGroup the host made")
    expected = pack().PassConditioning().passed(given)[0]
    expect(same(ksample(model, passed, negative, latent), ksample(model, expected, negative, latent)),
           "the samples with the host's control net differ from the same graph in one process")
    (own,) = node("OwnControl").apply(conditioning=positive, image=hint, strength=0.8)
    control, hooks = own[0][1]["control"], own[0][1]["hooks"]
    expect(isinstance(control, comfy.controlnet.ControlBase) and link_of(control) is not None and
           isinstance(hooks, comfy.hooks.HookGroup) and link_of(hooks) is not None and
           [hook.strength for hook in hooks.hooks] == [0.8],
           f"the pack's control net and hooks are {control!r} and {hooks!r}, not the pack's in its worker")
    isolated = ksample(model, own, negative, latent)
    expect(same(isolated, ksample(model, pack().OwnControl().apply(positive, hint, 0.8)[0], negative, latent)),
           "the samples with the pack's control net differ from the same graph in one process")
    expect(not same(isolated, ksample(model, positive, negative, latent)), "the pack's control net changed nothing")


def check_pack_model():
    _, _, _, positive, negative, latent = graph()
    (model,) = node("LoadModel").load(name="pack-model")
    expect(isinstance(model, comfy.model_patcher.ModelPatcher) and link_of(model) is not None,
           f"the pack's MODEL is {model!r}, not a ModelPatcher to isinstance that stays in the worker")
    session = _checks.link("model").session
    expect(_checks.link("model").handle_generation.get("LoadModel") == session.generation,
           "ComfyUI's cache is not told that the output dies with the worker's life")
    mm.unload_all_models()  # none of the host's own: the checks before loaded models of this size
    isolated = ksample(model, positive, negative, latent)
    expect(not any(link_of(entry.model) is not None for entry in mm.current_loaded_models),
           "a proxy is in the host's list of loaded models")
    host = _checks.host
    weights = sum(t.numel() * t.element_size() for t in pack().LoadModel().load("x")[0].model.state_dict().values())
    ledger = host.link.read_ledger()
    theirs = [entry for entry in ledger if entry.owner_slot != host.link.slot and entry.total_bytes == weights]
    ours = [entry for entry in ledger if entry.owner_slot == host.link.slot and entry.total_bytes == weights]
    expect(len(theirs) == 1 and not ours, f"the pack's model in the ledger: the pack's {theirs}, the host's {ours}")
    expect(same(isolated, ksample(pack().LoadModel().load("pack-model")[0], positive, negative, latent)),
           "the samples differ from the same graph in one process")


def check_forwarded():
    model, _, _, positive, negative, latent = graph()
    mm.unload_all_models()
    (isolated,) = node("SampleWithHost").sample(model=model, positive=positive, negative=negative, latent=latent,
                                                seed=7, steps=3)
    expect(any(entry.model is model for entry in mm.current_loaded_models),
           "the host's MODEL was not loaded by the host")
    expect(same(isolated["samples"], ksample(model, positive, negative, latent)),
           "the samples differ from the same graph in one process")


def check_masked_refusal():
    """A refusal that the pack's clean-up code masked (its finally raised in its turn) is what
    the node's error says first, with the masking error after it."""
    nodes.init_extra_nodes()
    (noise,) = nodes.NODE_CLASS_MAPPINGS["RandomNoise"]().get_noise(11)  # a proxy in the pack, not a replica
    try:
        node("MaskedRefusal").run(noise=noise)
        raised = None
    except Exception as error:  # noqa: BLE001 (whatever the node raised is what is checked)
        raised = error
    text = str(raised).splitlines()[0] if raised is not None else ""
    expect(text.startswith("RemoteError: a pack may not set seed of the host's RANDOM_NOISE") and
           "then, in the clean-up: UnboundLocalError" in text,
           f"the node's error says {type(raised).__name__}: {text!r}, not the refusal first")
    _checks.say(f"remote-masked-refusal: {text[:160]}")


def check_released():
    gc.collect()
    session = _checks.link("model").session
    deadline = time.monotonic() + 10
    while True:
        _checks.host.bridges.drain_idle()
        theirs = _checks.link("model").stats()["objects"]
        if (len(session.remote.exports), theirs) == (0, 0) or time.monotonic() > deadline:
            break
        gc.collect()
        time.sleep(0.05)
    expect((len(session.remote.exports), theirs) == (0, 0),
           f"the host still exports {len(session.remote.exports)} objects, the pack {theirs}")


def check_dead_owner():
    (model,) = node("LoadModel").load(name="pack-model")
    generation = _checks.link("model").session.generation
    _checks.raises(lambda: node("ExitMidNode").run(), proxy_nodes.PackWorkerDied)
    error = str(_checks.raises(lambda: model.clone(), RemoteError))
    expect("\n" not in error and error.startswith("clone of pack model's MODEL (ModelPatcher) is gone: pack model's "
                                                  f"worker life {generation} ended"), f"the dead owner's proxy: {error!r}")
    error = str(_checks.raises(lambda: node("PatchModel").patch(model=model, scale=1.0), ValueCrossingError))
    expect("\n" not in error and "is gone: pack model's worker life" in error, f"into the next life: {error!r}")
    (again,) = node("LoadModel").load(name="pack-model")
    expect(_checks.link("model").session.generation > generation and again.clone() is not None,
           "the pack's next life")


def check_host_restart():
    generation = _checks.host.link.generation
    if generation == 1:
        (kept,) = node("KeepHostObject").keep(model=graph()[0])
        expect(kept == 1, f"the pack kept {kept} MODELs")
        _checks.say("remote-host-restart: the pack keeps the host's MODEL; this life ends")
        os.kill(os.getpid(), signal.SIGKILL)
    (answer,) = node("UseKeptObject").use(model=graph()[0])
    answer = json.loads(answer)
    gone = f"the host's MODEL (ModelPatcher) is gone: the host's life {generation - 1} ended"
    for outcome, use in zip(answer["kept"], ("weights of", "diffusion_model of")):
        expect(outcome.startswith(f"RemoteError: {use} {gone}") and "\n" not in outcome,
               f"the pack's use of the MODEL the host's life {generation - 1} handed it: {outcome!r}")
    expect(answer["same_id"] and answer["fresh"], f"the MODEL this life handed over ({answer})")


def check_hostile():
    model = graph()[0]
    options = repr(model.model_options)
    (answers,) = _checks.node("ProbeHostObjects", "hostile").run(model=model)
    answers = json.loads(answers)
    for outcome, kind, message in answers:
        expect(outcome == "error" and "\n" not in message, f"a probe was answered {outcome} {kind} {message!r}")
    expect(len(answers) == 13, f"{len(answers)} probes answered")
    expect(repr(model.model_options) == options and model.object_patches == {}, "a probe changed the MODEL")
    expect(_checks.node("Add", "hostile").run(a=1, b=2) == (3,), "the pack's next call")
    _checks.say("remote-hostile: " + "; ".join(message for _, _, message in answers[:4]))


class CanaryWriter:
    """A host object of no kind: its method, in a model_options, is what no pack is handed."""

    def __init__(self, path):
        self.path = path

    def write(self):
        with open(self.path, "w") as canary:
            canary.write(str(os.getpid()))


def check_walk():
    model = graph()[0]
    hooked = model.clone()
    folder = tempfile.mkdtemp(prefix="comfy-walk-")
    canary = os.path.join(folder, "canary")
    hooked.model_options["transformer_options"]["host_hook"] = CanaryWriter(canary).write
    options = repr(model.model_options)
    classes = {(cls, name): vars(cls).get(name) for cls in (comfy.model_base.BaseModel, comfy.model_base.TinyUNet,
                                                            comfy.model_sampling.ModelSamplingDiscrete)
               for name in ("apply_model", "forward", "_forward", "__call__")}
    try:
        answers, clone = _checks.node("WalkHostObjects", "hostile").run(model=model, hooked=hooked, canary=canary,
                                                                        flood=200)
        answers = json.loads(answers)
        patches = dict(clone.object_patches)
        try:
            clone.patch_model()  # where upstream sets the object patches a pack added
            clone.unpatch_model()
        except Exception as error:  # noqa: BLE001 (the old walk's patches break upstream's own patching)
            patches["patch_model raised"] = repr(error)
        changed = [f"{cls.__name__}.{name}" for (cls, name), was in classes.items() if vars(cls).get(name) is not was]
    finally:
        for (cls, name), was in classes.items():  # so that a failing run leaves the next checks their classes
            if vars(cls).get(name) is not was and was is not None:
                setattr(cls, name, was)
            elif vars(cls).get(name) is not was:
                delattr(cls, name)
        written = os.path.exists(canary)
        shutil.rmtree(folder, ignore_errors=True)
    for what, outcome, message in answers:
        expect(outcome == "refused" and "\n" not in message, f"{what}: {outcome} {message!r}")
    expect(len(answers) == 12, f"{len(answers)} walks answered")
    expect(not written, "the host's eval or a host callable wrote the canary")
    expect(not changed and not patches, f"the walk changed the host's classes {changed}, or patched {patches}")
    expect(repr(model.model_options) == options and model.object_patches == {}, "the walk changed the MODEL")
    expect(_checks.node("Add", "hostile").run(a=1, b=2) == (3,), "the pack's next call")
    _checks.say("remote-walk: " + answers[0][2])


CHECKS = {"remote-patch": check_patch, "remote-options": check_options,
          "remote-options-in-place": check_options_in_place,
          "remote-noise": check_noise, "remote-clip-vae": check_clip_vae,
          "remote-control": check_control, "remote-upscale": check_upscale, "remote-conds": check_conds,
          "remote-cond-objects": check_cond_objects,
          "remote-pack-model": check_pack_model, "remote-forwarded": check_forwarded,
          "remote-released": check_released, "remote-masked-refusal": check_masked_refusal,
          "remote-dead-owner": check_dead_owner,
          "remote-host-restart": check_host_restart, "remote-hostile": check_hostile, "remote-walk": check_walk}

import replica_probe_checks  # noqa: E402 (the hostile pack's probes of its replica: remote-replica-*)
CHECKS.update(replica_probe_checks.CHECKS)
import replica_vae_vision_checks  # noqa: E402 (the host's VAE and CLIP_VISION as replicas)
CHECKS.update(replica_vae_vision_checks.CHECKS)
import replica_clip_checks  # noqa: E402 (the host's CLIP as a replica)
CHECKS.update(replica_clip_checks.CHECKS)
import relay_checks  # noqa: E402 (one pack's MODEL patched again by another)
CHECKS.update(relay_checks.CHECKS)
import lora_checks  # noqa: E402 (a LoRA of a pack's over a MODEL it patched)
CHECKS.update(lora_checks.CHECKS)
