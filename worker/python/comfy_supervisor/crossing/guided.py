"""ComfyUI's own guiders over a pack's MODEL, sampled in the pack (docs/PACKS.md, "Replicas").

ComfyUI's SamplerCustomAdvanced samples with a GUIDER its guider nodes made over a MODEL:
upstream's comfy.samplers.CFGGuider or one of upstream's subclasses of it (Guider_Basic,
Guider_DualCFG, Guider_PerpNeg...). Over a MODEL a pack patched (its clone of a replica),
upstream's guider in the host would reach into the pack's model at every use, many
crossings per model evaluation. So the guider's sample() given a pack's MODEL has the pack
build the same guider over its own model, of the same upstream class with the same state
(its conditioning and cfg, and what a subclass's set_cfg and set_conds keep), and sample
there: the host's sampler object (a KSAMPLER, which stays in the host) then calls that
guider once per model evaluation, and each evaluation runs in the pack with all the
model's patches.

A guider of a pack's own class samples as it is (the MODEL's pack may not have that class).
"""

import importlib

from ..bridge.remote import RemoteError, link_of

GUIDED_SAMPLE = "comfy_supervisor.crossing.guided.guided_sample"
# Where upstream's guiders are defined: the sampler module, and its own nodes' modules
# (imported by name in the pack, whatever path the host loaded them under).
_GUIDER_MODULES = ("comfy.samplers", "comfy_extras.nodes_custom_sampler", "comfy_extras.nodes_perpneg")
# What CFGGuider itself keeps of its model and of one sampling: the pack's guider has its own.
_NOT_STATE = ("model_patcher", "model_options", "inner_model", "conds", "loaded_models")


def install():
    """Wraps upstream's CFGGuider.sample, where this process's ComfyUI has it."""
    try:
        samplers = importlib.import_module("comfy.samplers")
    except ImportError:
        return
    original = getattr(getattr(samplers, "CFGGuider", None), "sample", None)
    if original is None or getattr(original, "_comfy_sv_guided", False):
        return  # a ComfyUI without upstream's guider, or wrapped already

    def sample(guider, noise, latent_image, sampler, sigmas, denoise_mask=None, callback=None, disable_pbar=False,
               seed=None):
        link = link_of(guider.model_patcher)
        path = _upstream_guider(guider)
        if link is None or link.kind.name != "MODEL" or path is None:
            return original(guider, noise, latent_image, sampler, sigmas, denoise_mask, callback, disable_pbar, seed)
        state = {name: value for name, value in vars(guider).items() if name not in _NOT_STATE}
        return link.session.call_function(GUIDED_SAMPLE, [guider.model_patcher, path, state, noise, latent_image,
                                                          sampler, sigmas, denoise_mask, callback, disable_pbar,
                                                          seed], {})

    sample._comfy_sv_guided = True
    samplers.CFGGuider.sample = sample


def _upstream_guider(guider):
    """"module.Class" of `guider`'s class where it is upstream's own (CFGGuider or a subclass
    one of _GUIDER_MODULES defines), which the pack rebuilds; None for a pack's class."""
    cls = type(guider)
    # Upstream loads its own nodes' files under their path ("/.../comfy_extras/nodes_perpneg").
    loaded_as = cls.__module__.replace("/", ".")
    module = next((name for name in _GUIDER_MODULES if loaded_as == name or loaded_as.endswith(f".{name}")), None)
    return f"{module}.{cls.__qualname__}" if module is not None else None


def guided_sample(model, path, state, noise, latent_image, sampler, sigmas, denoise_mask=None, callback=None,
                  disable_pbar=False, seed=None):
    """In the pack: the host guider's upstream class over the pack's `model`, with the host
    guider's state, sampled here."""
    samplers = importlib.import_module("comfy.samplers")
    module_name, _, name = str(path).rpartition(".")
    cls = getattr(importlib.import_module(module_name), name, None) if module_name in _GUIDER_MODULES else None
    if not (isinstance(cls, type) and issubclass(cls, samplers.CFGGuider)) or not isinstance(state, dict):
        raise RemoteError(f"a guider of {str(path)[:120]} is not one of upstream's, which this worker rebuilds")
    guider = cls(model)
    for attribute, value in state.items():
        setattr(guider, attribute, value)
    return guider.sample(noise, latent_image, sampler, sigmas, denoise_mask, callback, disable_pbar, seed)
