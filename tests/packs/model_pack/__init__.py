"""A custom node pack for the remote objects' tests (docs/PACKS.md, "Remote objects"): its
nodes do with ComfyUI's objects what popular packs do, so that a graph runs the same
isolated as in ComfyUI's own process.

- PatchModel: a host MODEL cloned, an object patch added (the pack's own sampling
  schedule), this pack's attention patch and CFG function set on it (IPAdapter, FreeU, PAG and the like), returned to the host's
  KSampler, which calls the pack's functions back on every step;
- NoiseLatent: a host NOISE's generate_noise and seed;
- EncodeText: a host CLIP's tokenize and encode_from_tokens_scheduled;
- VaeRoundTrip: a host VAE's encode, then decode;
- ApplyControl: a host CONTROL_NET copied with its cond hint set into CONDITIONING;
- CondValues: CONDITIONING whose model_conds hold upstream's comfy.conds values, read (what
  came, by class and size) and added to with values of the pack's own;
- PassConditioning: CONDITIONING holding the host's control net and hooks, copied through;
- OwnControl: a control net and hooks of the pack's own, put into CONDITIONING for the
  host's KSampler, which asks the pack's control net for its residuals every step;
- ReplaceAttention: a host MODEL's model_options changed in place on its clone, as
  IPAdapter changes them (its attention replacement under patches_replace);
- ReadModelOptions: a host MODEL's model_options read, changed in a copy, and set back on
  a clone, as packs do;
- LoadModel: a MODEL of the pack's own, for the host's KSampler;
- UpscaleWithHost: a host UPSCALE_MODEL moved, read (its scale) and called on the image,
  as upstream's ImageUpscaleWithModel does (and the upscalers of packs);
- SampleWithHost: a host MODEL loaded (comfy.model_management.load_models_gpu) and sampled
  with upstream's nodes.common_ksampler, as samplers of packs do;
- SampleWithUpstream: a MODEL sampled with upstream's comfy.samplers.KSampler class in the
  pack, as ComfyUI_Noise's Unsampler does (its CFGGuider reads hook_mode);
- PerturbedGuidance: a post-CFG function that evaluates the model again with upstream's
  calc_cond_batch, as PAG and SEG do (it reads current_patcher);
- MaskedRefusal: a refused read of the host's NOISE inside a try whose finally then fails on
  what the read never set, as upstream's CFGGuider.sample did;
- PatchAttention: only the attention patch, and EmptyFunction: a function of the pack's that
  does nothing, for scripts/bench bridge (the cost of a callback and of a call); WorkerCpu:
  this worker's CPU time so far, for its callback_cpu_us;
- ExitMidNode: the worker dies, for the tests of a dead owner;
- KeepHostObject and UseKeptObject: a host MODEL kept beyond its node, as a pack's cache
  would keep it, and used again in a later call (after the host restarted, for the test of
  a host proxy whose owner's life ended);
- MirrorForward: `model.model.diffusion_model` run with torch, through a
  mirror of the host's module; MirrorClipVision: a host CLIP_VISION's `model` run as
  IPAdapter runs it, through a mirror too; MirrorTamper: tries to write the host's weights through it;
  MirrorTouch: the same made ready, as a mirror or as a copy,
  for scripts/bench bridge;
- PatchManyTimes: `count` attention patches of the pack's on a host MODEL's clone, each
  counting its calls, and PatchUses: how many calls they took so far (a model evaluation
  calls each once), for scripts/bench bridge's crossings per evaluation; ReplicaTouch: a
  host MODEL's replica made ready (built, its diffusion model mapped), for its map time;
- replica_nodes.py: the host's VAE and CLIP_VISION used as upstream's code uses them.
- clip_nodes.py: the host's CLIP used as upstream's code uses it.
- lora_nodes.py: a LoRA of the pack's loaded over a MODEL it patched.
"""

import json
import os
import signal
import time
import types
import weakref

import torch

CATEGORY = "comfy-supervisor tests"


class Node:
    CATEGORY = CATEGORY


class AttentionScale:
    """An attention patch, as packs write them: an object that is called with the query,
    key and value on every step, holding what it needs (here, a scale)."""

    def __init__(self, scale):
        self.scale = scale

    def __call__(self, n, context_attn2, value_attn2, extra_options):
        return n * self.scale, context_attn2, value_attn2 * (2.0 - self.scale)


def rescaled_cfg(args):
    """A CFG function: upstream's formula with the guidance rescaled by 0.9."""
    cond, uncond = args["cond"], args["uncond"]
    return uncond + (cond - uncond) * (args["cond_scale"] * 0.9)


class PatchAttention(Node):
    FUNCTION = "patch"
    RETURN_TYPES = ("MODEL",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",), "scale": ("FLOAT", {"default": 1.05})}}

    def patch(self, model, scale):
        patched = model.clone()
        patched.set_model_attn2_patch(AttentionScale(scale))
        return (patched,)


class PatchModel(PatchAttention):
    def patch(self, model, scale):
        (patched,) = super().patch(model, scale)
        patched.set_model_sampler_cfg_function(rescaled_cfg)
        # The pack's own sampling schedule in place of the model's: an object of the pack's
        # that the host's sampler uses every step.
        patched.add_object_patch("model_sampling", pack_schedule(linear_end=0.0125))
        return (patched,)


def pack_schedule(**settings):
    """A sampling schedule of the pack's own, made as upstream's ModelSamplingDiscrete node
    makes one: upstream's discrete schedule with the EPS prediction, over `settings`."""
    import comfy.model_sampling as sampling

    class PackSchedule(sampling.ModelSamplingDiscrete, sampling.EPS):
        pass
    return PackSchedule(types.SimpleNamespace(sampling_settings=settings))


class ReadModelOptions(Node):
    FUNCTION = "read"
    RETURN_TYPES = ("MODEL",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",)}}

    def read(self, model):
        patched = model.clone()
        options = patched.model_options.copy()
        options["transformer_options"] = dict(options["transformer_options"])
        options["transformer_options"]["pack_seen"] = True
        patched.model_options = options
        return (patched,)


class AttentionReplacement:
    """A cross attention of the pack's own, as IPAdapter's Attn2Replace: called instead of
    the block's, with the query, key and value projected; `add` stacks one more scale on a
    replacement set already, as IPAdapter's does for a second adapter."""

    def __init__(self, scale):
        self.scales = [scale]

    def add(self, scale):
        self.scales.append(scale)

    def __call__(self, q, k, v, extra_options):
        heads = extra_options["n_heads"]
        b, n, d = q.shape
        q, k, v = (t.reshape(b, -1, heads, d // heads).transpose(1, 2) for t in (q, k, v))
        weights = torch.softmax(q @ k.transpose(-1, -2) / (d // heads) ** 0.5, dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(b, n, d)
        for scale in self.scales:
            out = out * scale
        return out


class ReplaceAttention(Node):
    """Changes a host MODEL's model_options in place on its clone, as IPAdapter's
    set_model_patch_replace does: the transformer options copied, a replacement of the
    pack's own put under patches_replace["attn2"], and the copy set as
    `model.model_options["transformer_options"]`; a second scale added to the replacement
    found there; and a key written deeper down in place."""

    FUNCTION = "patch"
    RETURN_TYPES = ("MODEL",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",), "scale": ("FLOAT", {"default": 1.1})}}

    def patch(self, model, scale):
        patched = model.clone()
        for each in (scale, 2.0 - scale):
            to = patched.model_options["transformer_options"].copy()
            to["patches_replace"] = dict(to.get("patches_replace", {}))
            to["patches_replace"]["attn2"] = dict(to["patches_replace"].get("attn2", {}))
            key = ("middle", 0)
            if key not in to["patches_replace"]["attn2"]:
                to["patches_replace"]["attn2"][key] = AttentionReplacement(each)
                patched.model_options["transformer_options"] = to
            else:
                to["patches_replace"]["attn2"][key].add(each)
        patched.model_options["transformer_options"]["pack_replaced"] = True
        return (patched,)


class NoiseLatent(Node):
    """A host NOISE asked for the noise of a latent, and its seed read, as a pack's sampler
    does with the NOISE of upstream's custom sampling nodes."""

    FUNCTION = "noise"
    RETURN_TYPES = ("LATENT", "INT")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"noise": ("NOISE",), "latent": ("LATENT",)}}

    def noise(self, noise, latent):
        return ({"samples": noise.generate_noise(latent)}, noise.seed)


class EncodeText(Node):
    FUNCTION = "encode"
    RETURN_TYPES = ("CONDITIONING",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"clip": ("CLIP",), "text": ("STRING", {"default": ""})}}

    def encode(self, clip, text):
        return (clip.encode_from_tokens_scheduled(clip.tokenize(text)),)


class VaeRoundTrip(Node):
    FUNCTION = "round_trip"
    RETURN_TYPES = ("IMAGE", "LATENT")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"vae": ("VAE",), "image": ("IMAGE",)}}

    def round_trip(self, vae, image):
        latent = vae.encode(image[:, :, :, :3])
        return (vae.decode(latent), {"samples": latent})


class ApplyControl(Node):
    FUNCTION = "apply"
    RETURN_TYPES = ("CONDITIONING",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"conditioning": ("CONDITIONING",), "control_net": ("CONTROL_NET",),
                             "image": ("IMAGE",), "strength": ("FLOAT", {"default": 1.0})}}

    def apply(self, conditioning, control_net, image, strength):
        out = []
        for cond, extra in conditioning:
            extra = extra.copy()
            extra["control"] = control_net.copy().set_cond_hint(image.movedim(-1, 1), strength)
            out.append([cond, extra])
        return (out,)


class CondValues(Node):
    FUNCTION = "values"
    RETURN_TYPES = ("CONDITIONING", "STRING")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"conditioning": ("CONDITIONING",)}}

    def values(self, conditioning):
        import comfy.conds
        out, seen = [], []
        for cond, extra in conditioning:
            extra = extra.copy()
            model_conds = dict(extra.get("model_conds", {}))
            seen += [[key, type(value).__name__, value.size()] for key, value in model_conds.items()]
            model_conds.update({
                "pack_pooled": comfy.conds.CONDRegular(extra["pooled_output"] * 2.0),
                "pack_context": comfy.conds.CONDCrossAttn(cond.flip(1)),
                "pack_latent": comfy.conds.CONDNoiseShape(torch.full((1, 4, 4, 4), 0.25)),
                "pack_frames": comfy.conds.CONDConstant(3),
                "pack_refs": comfy.conds.CONDList([cond[:, :2], cond[:, 2:]]),
            })
            extra["model_conds"] = model_conds
            out.append([cond, extra])
        return (out, json.dumps(seen))


class PassConditioning(Node):
    FUNCTION = "passed"
    RETURN_TYPES = ("CONDITIONING",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"conditioning": ("CONDITIONING",)}}

    def passed(self, conditioning):
        out = []
        for cond, extra in conditioning:
            extra = extra.copy()
            extra["hooks"] = extra["hooks"].clone_and_combine(None) if extra.get("hooks") is not None else None
            out.append([cond, {**extra, "pack_seen": True}])
        return (out,)


class OwnControl(Node):
    FUNCTION = "apply"
    RETURN_TYPES = ("CONDITIONING",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"conditioning": ("CONDITIONING",), "image": ("IMAGE",),
                             "strength": ("FLOAT", {"default": 1.0})}}

    def apply(self, conditioning, image, strength):
        import comfy.controlnet
        import comfy.hooks
        control = comfy.controlnet.ControlNet().set_cond_hint(image.movedim(-1, 1), strength)
        hooks = comfy.hooks.HookGroup()
        hooks.add(comfy.hooks.Hook(strength=strength))
        return ([[cond, {**extra, "control": control.copy(), "hooks": hooks}] for cond, extra in conditioning],)


class UpscaleWithHost(Node):
    FUNCTION = "upscale"
    RETURN_TYPES = ("IMAGE", "FLOAT")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"upscale_model": ("UPSCALE_MODEL",), "image": ("IMAGE",)}}

    def upscale(self, upscale_model, image):
        upscale_model.to("cpu")
        upscaled = upscale_model(image.movedim(-1, -3))
        return (torch.clamp(upscaled.movedim(-3, -1), min=0, max=1.0), float(upscale_model.scale))


class LoadModel(Node):
    FUNCTION = "load"
    RETURN_TYPES = ("MODEL",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"name": ("STRING", {"default": "pack-model"})}}

    def load(self, name):
        import comfy.sd
        return (comfy.sd.load_checkpoint_guess_config(name, output_vae=False, output_clip=False)[0],)


class SampleWithHost(Node):
    FUNCTION = "sample"
    RETURN_TYPES = ("LATENT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",), "positive": ("CONDITIONING",), "negative": ("CONDITIONING",),
                             "latent": ("LATENT",), "seed": ("INT", {"default": 0}), "steps": ("INT", {"default": 3})}}

    def sample(self, model, positive, negative, latent, seed, steps):
        import comfy.model_management
        import nodes
        comfy.model_management.load_models_gpu([model])
        return nodes.common_ksampler(model, seed, steps, 7.5, "euler", "normal", positive, negative, latent)


class SampleWithUpstream(SampleWithHost):
    """Samples the MODEL with upstream's own sampler classes in the pack, as ComfyUI_Noise's
    Unsampler and the tiled samplers do: comfy.samplers.KSampler over the model, whose
    CFGGuider reads hook_mode and whose calc_cond_batch reads current_patcher."""

    def sample(self, model, positive, negative, latent, seed, steps):
        import comfy.model_management
        import comfy.sample
        import comfy.samplers
        samples = latent["samples"]
        noise = comfy.sample.prepare_noise(samples, seed)
        comfy.model_management.load_models_gpu([model])
        sampler = comfy.samplers.KSampler(model, steps=steps, device=model.load_device, sampler="euler",
                                          scheduler="normal", denoise=1.0, model_options=model.model_options)
        out = sampler.sample(noise, positive, negative, cfg=7.5, latent_image=samples, seed=seed)
        return ({"samples": out.cpu()},)


class PerturbedGuidance(Node):
    """A guidance of the pack's that evaluates the model once more per step, as PAG and SEG
    do: a post-CFG function that runs upstream's calc_cond_batch on the model it is given
    with an attention patch of its own, and steers the result away from that output."""
    FUNCTION = "patch"
    RETURN_TYPES = ("MODEL",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",), "scale": ("FLOAT", {"default": 0.5})}}

    def patch(self, model, scale):
        import comfy.model_patcher
        import comfy.samplers

        def post_cfg(args):
            options = comfy.model_patcher.set_model_options_patch_replace(
                args["model_options"].copy(), lambda q, k, v, extra: v, "attn1", "middle", 0)
            (perturbed,) = comfy.samplers.calc_cond_batch(args["model"], [args["cond"]], args["input"],
                                                          args["sigma"], options)
            return args["denoised"] + (args["cond_denoised"] - perturbed) * scale

        patched = model.clone()
        patched.set_model_sampler_post_cfg_function(post_cfg)
        return (patched,)


class MaskedRefusal(Node):
    """Sets what a pack may not set of the host's NOISE inside a try whose finally then fails
    in its turn, as upstream's CFGGuider.sample did over a refused read of the host MODEL's
    hook_mode (UnboundLocalError: 'orig_hook_mode')."""
    FUNCTION = "run"
    RETURN_TYPES = ("INT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"noise": ("NOISE",)}}

    def run(self, noise):
        try:
            noise.seed = 1
            seed = 1
            return (0,)
        finally:
            noise.seed = seed  # noqa: F821 (unbound when the write above raised, as upstream's)


def nothing():
    """Does nothing: called from the host, it measures a remote call."""


class EmptyFunction(Node):
    FUNCTION = "make"
    RETURN_TYPES = ("FUNCTION",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def make(self):
        return (nothing,)


class WorkerCpu(Node):
    FUNCTION = "cpu"
    RETURN_TYPES = ("FLOAT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def cpu(self):
        return (time.process_time(),)  # every thread of this process, in seconds


class ExitMidNode(Node):
    FUNCTION = "run"
    RETURN_TYPES = ()

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def run(self):
        os.kill(os.getpid(), signal.SIGKILL)


KEPT = []  # host objects kept beyond their node


class KeepHostObject(Node):
    FUNCTION = "keep"
    RETURN_TYPES = ("INT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",)}}

    def keep(self, model):
        KEPT.append(model)
        return (len(KEPT),)


class UseKeptObject(Node):
    """What became of each use of the kept MODEL that needs its owner ("used", or the error's
    type and message): its load, and a forward of its diffusion model (a replica's weights
    are its owner's), beside a use of the MODEL given now, and whether the host's objects the
    two stand for have the same id in their sessions (one resolved by its id alone would be
    the new MODEL)."""
    FUNCTION = "use"
    RETURN_TYPES = ("STRING",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",)}}

    def use(self, model):
        import comfy.model_management
        from comfy_supervisor.bridge.remote import link_of
        from comfy_supervisor.crossing.replicas import origin_of
        kept = KEPT[-1]
        outcomes = []
        for use in (lambda m: comfy.model_management.load_models_gpu([m]),
                    lambda m: mirror_forward(m.model.diffusion_model)):
            try:
                use(kept)
                outcomes.append("used")
            except Exception as error:  # noqa: BLE001 (what it raised is the answer)
                outcomes.append(f"{type(error).__name__}: {error}")
        return (json.dumps({"kept": outcomes, "fresh": model.clone() is not None,
                            "same_id": link_of(origin_of(kept)).id == link_of(origin_of(model)).id}),)


def mirror_forward(unet):
    """The diffusion model on a fixed input: what a pack computes with it. The context is as
    wide as the module's cross attention takes (its first attn2.to_k's inputs)."""
    width = next(m.weight.shape[1] for name, m in unet.named_modules() if name.endswith("attn2.to_k"))
    generator = torch.Generator().manual_seed(11)
    x = torch.randn(1, 4, 4, 4, generator=generator)
    context = torch.randn(1, 3, width, generator=generator)
    with torch.no_grad():
        return unet(x, torch.tensor([500.0]), context)


class MirrorForward(Node):
    """Runs the host MODEL's diffusion model (`by_name`: read with get_model_object) and
    reads its weights' norm. `write`: first
    doubles a weight in place (the worker's own, never the host's); `probe`: a function of
    the host's called while the mirror is held, after which the module is run again and
    what that did is the third output ("ran", or the error's one line)."""

    FUNCTION = "run"
    RETURN_TYPES = ("LATENT", "FLOAT", "STRING")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",)}, "optional": {"write": ("BOOLEAN", {"default": False}),
                                                                "by_name": ("BOOLEAN", {"default": False})}}

    def run(self, model, write=False, probe=None, by_name=False):
        # by_name: as 13 classes of popular packs reach it
        unet = model.get_model_object("diffusion_model") if by_name else model.model.diffusion_model
        if write:
            with torch.no_grad():
                unet.proj_in.weight.mul_(2.0)
        out = mirror_forward(unet)
        with torch.no_grad():
            norm = float(torch.stack([p.double().norm() for p in unet.parameters()]).norm())
        after = ""
        if probe is not None:
            probe()
            try:
                mirror_forward(unet)
                after = "ran"
            except Exception as error:  # noqa: BLE001 (what the mirror raised is the output)
                after = f"{type(error).__name__}: {error}"
        return ({"samples": out}, norm, after)


class MirrorClipVision(Node):
    """Runs the host CLIP_VISION's own model with torch, as IPAdapter encodes an image
    (`clip_vision.model(pixel_values=..., intermediate_output=-2)`): through a mirror of the
    host's module. Its penultimate hidden states are the output."""

    FUNCTION = "run"
    RETURN_TYPES = ("LATENT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"clip_vision": ("CLIP_VISION",), "image": ("IMAGE",)}}

    def run(self, clip_vision, image):
        import comfy.clip_vision
        pixels = comfy.clip_vision.clip_preprocess(image, size=clip_vision.image_size, mean=clip_vision.image_mean,
                                                   std=clip_vision.image_std).float()
        with torch.no_grad():
            out = clip_vision.model(pixel_values=pixels, intermediate_output=-2)
        return ({"samples": out[1]},)


class MirrorTamper(Node):
    """A hostile use of a mirror: the node finds the mapping of the host's weights in its own
    process and tries to write them for the host: through the mapping's file reopened
    writable (pwrite, and a shared writable mapping). Returns what each try did."""

    FUNCTION = "tamper"
    RETURN_TYPES = ("STRING",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",)}}

    def tamper(self, model):
        import mmap
        unet = model.model.diffusion_model
        outcomes = []
        with open("/proc/self/maps") as maps:
            ranges = [line.split()[0] for line in maps if "comfy-sv-mirror" in line]
        for where in ranges:
            for attempt in ("pwrite", "shared mapping"):
                try:
                    fd = os.open(f"/proc/self/map_files/{where}", os.O_RDWR)
                    try:
                        if attempt == "pwrite":
                            os.pwrite(fd, b"\xff" * 64, mmap.PAGESIZE)
                        else:
                            mmap.mmap(fd, mmap.PAGESIZE, mmap.MAP_SHARED, mmap.PROT_WRITE)[:8] = b"\xff" * 8
                    finally:
                        os.close(fd)
                    outcomes.append(f"{attempt}: written")
                except OSError as error:
                    outcomes.append(f"{attempt}: {type(error).__name__}")
        return (f"{len(ranges)} mappings; " + "; ".join(outcomes) + f"; {len(list(unet.parameters()))} parameters",)


class MirrorTouch(Node):
    """For scripts/bench bridge: the host MODEL's diffusion model made ready in the worker,
    as a mirror (`model`) or as its weights sent in as values (`weights`, a copy); counts
    their elements, reading none."""

    FUNCTION = "touch"
    RETURN_TYPES = ("INT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}, "optional": {"model": ("MODEL",)}}

    def touch(self, model=None, weights=None):
        tensors = model.model.diffusion_model.parameters() if model is not None else weights.values()
        return (sum(tensor.numel() for tensor in tensors),)


PATCH_USES = [0]  # calls of CountedAttention patches in this process so far


class CountedAttention:
    """An attention patch that changes nothing and counts its calls: what a model evaluation
    with many patches of a pack costs beyond the patches' own work is the crossings."""

    def __call__(self, n, context_attn2, value_attn2, extra_options):
        PATCH_USES[0] += 1
        return n, context_attn2, value_attn2


class PatchManyTimes(Node):
    FUNCTION = "patch"
    RETURN_TYPES = ("MODEL",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",), "count": ("INT", {"default": 1, "min": 1})}}

    def patch(self, model, count):
        patched = model.clone()
        for _ in range(count):
            patched.set_model_attn2_patch(CountedAttention())
        return (patched,)


class PatchUses(Node):
    FUNCTION = "uses"
    RETURN_TYPES = ("INT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def uses(self):
        return (PATCH_USES[0],)


_LAST_TOUCHED = []  # a weak reference to the MODEL ReplicaTouch was given last


class ReplicaTouch(Node):
    """For scripts/bench bridge: the host MODEL's replica made ready in the worker (upstream's
    ModelPatcher built, its diffusion model's mirror mapped); counts the diffusion model's
    elements, reading none. Also its class's name, and whether it is another object than
    the one given last (a replica built for this call, not one kept from the last)."""

    FUNCTION = "touch"
    RETURN_TYPES = ("INT", "STRING", "BOOLEAN")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",)}}

    def touch(self, model):
        fresh = not _LAST_TOUCHED or _LAST_TOUCHED[0]() is not model
        _LAST_TOUCHED[:] = [weakref.ref(model)]
        return (sum(tensor.numel() for tensor in model.model.diffusion_model.parameters()), type(model).__name__,
                fresh)


NODE_CLASS_MAPPINGS = {cls.__name__: cls for cls in (PatchModel, ReadModelOptions, ReplaceAttention, NoiseLatent,
                                                      EncodeText,
                                                      VaeRoundTrip, ApplyControl, CondValues, PassConditioning,
                                                      OwnControl, LoadModel, UpscaleWithHost, SampleWithHost,
                                                      SampleWithUpstream, PerturbedGuidance, MaskedRefusal,
                                                      PatchAttention, EmptyFunction, WorkerCpu, ExitMidNode,
                                                      KeepHostObject,
                                                      UseKeptObject, MirrorForward, MirrorClipVision, MirrorTamper,
                                                      MirrorTouch, PatchManyTimes, PatchUses,
                                                      ReplicaTouch)}

from . import replica_nodes  # noqa: E402 (the host's VAE and CLIP_VISION as upstream's code uses them)
NODE_CLASS_MAPPINGS.update(replica_nodes.NODE_CLASS_MAPPINGS)
from . import clip_nodes  # noqa: E402 (the host's CLIP as upstream's code uses it)
NODE_CLASS_MAPPINGS.update(clip_nodes.NODE_CLASS_MAPPINGS)
from . import lora_nodes  # noqa: E402 (a LoRA of the pack's over a MODEL it patched)
NODE_CLASS_MAPPINGS.update(lora_nodes.NODE_CLASS_MAPPINGS)
