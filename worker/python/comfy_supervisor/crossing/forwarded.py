"""Upstream's functions that take a MODEL, run by the side whose MODEL it is (docs/PACKS.md,
"Replicas"):

- in the host, given a pack's MODEL (a clone of a replica the pack patched, or a model it
  loaded), comfy.sample.sample, sample_custom and nodes.common_ksampler sample in the
  pack, on its replica, where its patches live: the whole sampling crosses once, and
  only the host's own functions in it (its preview callback, the host's patches the
  replica carries) are called back;
- in a pack's worker, given the host's MODEL as it was handed over (its replica, or a
  proxy where it is not replicated), the host samples with it, its own model; and
  comfy.sd.load_lora_for_models patches the MODEL and CLIP where their weights are (a
  replica the pack patched in the pack, whose load carries the LoRA's adapters to the
  host by value; the host's CLIP, a proxy or its replica as handed over, in the host, so
  that the patched CLIP is the host's, as it would be in one process).
Given a MODEL of its own process, each is upstream's own, run here. Only the MODEL
argument decides (and the CLIP, for a LoRA): the other arguments (a callback, a
conditioning's control net) stay what they are wherever the function runs.

Wrapped before a pack is imported, and in the host before a prompt runs, so that code
that imports one by name gets this one.
"""

import functools
import importlib
import inspect

from ..bridge.remote import link_of
from . import replicas

_LORA = "comfy.sd.load_lora_for_models"
FORWARDED = ("comfy.sample.sample", "comfy.sample.sample_custom", "nodes.common_ksampler", _LORA)


def install():
    """Wraps each of FORWARDED that this process's ComfyUI has, one written attribute each
    (the layering check lists every write into ComfyUI of the host's process)."""
    try:
        sample = importlib.import_module("comfy.sample")
        nodes = importlib.import_module("nodes")
        sd = importlib.import_module("comfy.sd")
    except ImportError:
        return  # a process without ComfyUI has nothing to forward
    # Each only where this process's ComfyUI has it.
    if hasattr(sample, "sample"):
        sample.sample = _wrapped("comfy.sample.sample", sample.sample)
    if hasattr(sample, "sample_custom"):
        sample.sample_custom = _wrapped("comfy.sample.sample_custom", sample.sample_custom)
    if hasattr(nodes, "common_ksampler"):
        nodes.common_ksampler = _wrapped("nodes.common_ksampler", nodes.common_ksampler)
    if hasattr(sd, "load_lora_for_models"):
        sd.load_lora_for_models = _wrapped(_LORA, sd.load_lora_for_models)


def _wrapped(name, original):
    """`original` forwarded, once (upstream's own decorators set __wrapped__ too: not that)."""
    return original if getattr(original, "_comfy_sv_forwarded", False) else _forwarding(name, original)


def _forwarding(name, original):
    signature = inspect.signature(original)

    @functools.wraps(original)
    def forwarded(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs).arguments
        except TypeError:
            return original(*args, **kwargs)  # upstream's own TypeError
        owner = _owner(bound.get("model"))
        if owner is not None:
            return owner.call_function(name, args, kwargs)
        clip_owner = _owner(bound.get("clip"), "CLIP")
        if name == _LORA and clip_owner is not None:
            return _lora_split(original, bound, clip_owner)
        return original(*args, **kwargs)
    forwarded._comfy_sv_forwarded = True
    return forwarded


def _owner(model, kind="MODEL"):
    """The conversation whose peer owns `model` (a MODEL, or a CLIP): a proxy of the peer's,
    or the replica of one as it was handed over (the peer's own, which goes back as the
    peer's). A clone of a replica is this process's: its patches are here."""
    origin = replicas.origin_of(model)
    link = link_of(model if origin is None else origin)
    return link.session if link is not None and link.kind.name == kind else None


def _lora_split(original, bound, clip_owner):
    """load_lora_for_models over a MODEL of this process (a replica the pack patched) and the
    host's CLIP: each part where its weights are, as upstream would do the two parts."""
    lora, strength_model, strength_clip = bound["lora"], bound["strength_model"], bound["strength_clip"]
    _, clip = clip_owner.call_function(_LORA, [None, bound["clip"], lora, 0.0, strength_clip], {})
    model, _ = original(bound.get("model"), None, lora, strength_model, 0.0) if bound.get("model") is not None \
        else (None, None)
    return model, clip
