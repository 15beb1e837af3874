"""Upstream's functions a pack calls with the host's objects, run by the host (docs/PACKS.md,
"Remote objects"): comfy.sample.sample and nodes.common_ksampler given the host's MODEL
sample in the host, over the host's weights and memory, calling the pack's patches back;
comfy.sd.load_lora_for_models patches the host's MODEL and CLIP where their weights are.
Given none of the host's objects, each is upstream's own, run here. The loads
(load_models_gpu) are forwarded by the memory integration (host/comfyui.py).

Wrapped before the pack is imported, so that a pack that imports one by name gets this one.
"""

import functools
import importlib

from ..bridge.conversation import owner_of

FORWARDED = ("comfy.sample.sample", "comfy.sample.sample_custom", "nodes.common_ksampler",
             "comfy.sd.load_lora_for_models")


def install():
    """Wraps each of FORWARDED that this process's ComfyUI has."""
    for name in FORWARDED:
        module_name, _, attribute = name.rpartition(".")
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        original = getattr(module, attribute, None)
        if callable(original):
            setattr(module, attribute, _forwarding(name, original))


def _forwarding(name, original):
    @functools.wraps(original)
    def forwarded(*args, **kwargs):
        owner = owner_of(list(args) + list(kwargs.values()))
        if owner is None:
            return original(*args, **kwargs)
        return owner.call_function(name, args, kwargs)
    return forwarded
