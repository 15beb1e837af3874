"""A custom node pack for the remote objects' tests (docs/PACKS.md, "Remote objects"): its
nodes do with ComfyUI's objects what popular packs do, so that a graph runs the same
isolated as in ComfyUI's own process.

- PatchModel: a host MODEL cloned, an object patch added (the pack's own sampling
  schedule), this pack's attention patch and CFG function set on it (IPAdapter, FreeU, PAG and the like), returned to the host's
  KSampler, which calls the pack's functions back on every step;
- EncodeText: a host CLIP's tokenize and encode_from_tokens_scheduled;
- VaeRoundTrip: a host VAE's encode, then decode;
- ApplyControl: a host CONTROL_NET copied with its cond hint set into CONDITIONING;
- ReadModelOptions: a host MODEL's model_options read, changed in a copy, and set back on
  a clone, as packs do;
- LoadModel: a MODEL of the pack's own, for the host's KSampler;
- SampleWithHost: a host MODEL loaded (comfy.model_management.load_models_gpu) and sampled
  with upstream's nodes.common_ksampler, as samplers of packs do: both run in the host;
- PatchAttention: only the attention patch, and EmptyFunction: a function of the pack's that
  does nothing, for scripts/bench bridge (the cost of a callback and of a call);
- ExitMidNode: the worker dies, for the tests of a dead owner.
"""

import os
import signal
import types

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


class ExitMidNode(Node):
    FUNCTION = "run"
    RETURN_TYPES = ()

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def run(self):
        os.kill(os.getpid(), signal.SIGKILL)


NODE_CLASS_MAPPINGS = {cls.__name__: cls for cls in (PatchModel, ReadModelOptions, EncodeText, VaeRoundTrip,
                                                      ApplyControl, LoadModel, SampleWithHost, PatchAttention, EmptyFunction,
                                                      ExitMidNode)}
