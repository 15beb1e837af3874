"""ComfyUI's own guider over a pack's MODEL, sampled in the pack (docs/PACKS.md, "Replicas").

ComfyUI's SamplerCustomAdvanced samples with a GUIDER its CFGGuider or BasicGuider node made
over a MODEL: upstream's comfy.samplers.CFGGuider (or its Guider_Basic, the same sampling).
Over a MODEL a pack patched (its clone of a replica), upstream's guider in the host would
reach into the pack's model at every use, many crossings per model evaluation. So the
guider's sample() given a pack's MODEL has the pack build the same guider over its own
model, from the guider's conditioning and cfg, and sample there: the host's sampler
object (a KSAMPLER, which stays in the host) then calls that guider once per model
evaluation, and each evaluation runs in the pack with all the model's patches.

A guider of another class (DualCFGGuider, a pack's) samples as it is.
"""

import importlib

from ..bridge.remote import link_of

GUIDED_SAMPLE = "comfy_supervisor.crossing.guided.guided_sample"
_GUIDERS = (("comfy.samplers", "CFGGuider"), ("comfy_extras.nodes_custom_sampler", "Guider_Basic"))


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
        if link is None or link.kind.name != "MODEL" or not _plain_guider(guider):
            return original(guider, noise, latent_image, sampler, sigmas, denoise_mask, callback, disable_pbar, seed)
        return link.session.call_function(GUIDED_SAMPLE, [guider.model_patcher, guider.original_conds, guider.cfg,
                                                          noise, latent_image, sampler, sigmas, denoise_mask,
                                                          callback, disable_pbar, seed], {})

    sample._comfy_sv_guided = True
    samplers.CFGGuider.sample = sample


def _plain_guider(guider):
    """Whether `guider` is upstream's CFGGuider or Guider_Basic itself, whose sampling this
    file rebuilds: never a subclass of another's, which may sample otherwise."""
    cls = type(guider)
    return any(cls.__module__.endswith(module) and cls.__qualname__ == name for module, name in _GUIDERS)


def guided_sample(model, conds, cfg, noise, latent_image, sampler, sigmas, denoise_mask=None, callback=None,
                  disable_pbar=False, seed=None):
    """In the pack: upstream's CFGGuider over the pack's `model`, with the host guider's
    conditioning and cfg, sampled here."""
    samplers = importlib.import_module("comfy.samplers")
    guider = samplers.CFGGuider(model)
    guider.original_conds = dict(conds)
    guider.set_cfg(cfg)
    return guider.sample(noise, latent_image, sampler, sigmas, denoise_mask, callback, disable_pbar, seed)
