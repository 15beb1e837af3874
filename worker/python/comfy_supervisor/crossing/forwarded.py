"""Upstream's functions that take a MODEL, run by the side whose MODEL it is (docs/PACKS.md,
"Replicas"):

- in the host, given a pack's MODEL (a clone of a replica the pack patched, or a model it
  loaded), comfy.sample.sample, sample_custom and nodes.common_ksampler sample in the
  pack, on its replica, where its patches live: the whole sampling crosses once, and
  only the host's own functions in it (its preview callback, the host's patches the
  replica carries) are called back;
- in a pack's worker, given the host's MODEL where it still arrives as a proxy, the host
  samples; and comfy.sd.load_lora_for_models patches the MODEL and CLIP where their
  weights are.
Given a MODEL of its own process, each is upstream's own, run here. Only the MODEL
argument decides: the other arguments (a callback, a conditioning's control net) stay
what they are wherever the function runs.

Wrapped before a pack is imported, and in the host before a prompt runs, so that code
that imports one by name gets this one.
"""

import functools
import importlib

from ..bridge.remote import link_of

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
        if callable(original) and not hasattr(original, "__wrapped__"):
            setattr(module, attribute, _forwarding(name, original))


def _forwarding(name, original):
    @functools.wraps(original)
    def forwarded(*args, **kwargs):
        link = link_of(args[0] if args else kwargs.get("model"))
        if link is None or link.kind.name != "MODEL":
            return original(*args, **kwargs)
        return link.session.call_function(name, args, kwargs)
    return forwarded
