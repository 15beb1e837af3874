"""hostile_pack's functions that the host calls back and that never return, for the tests of
Cancel reaching a callback (tests/python/callback_cancel_test.cpp) and the soak:

- PatchCfgForever: the host's MODEL cloned with a CFG function that never returns and never
  checks for interrupts, for the host's KSampler;
- PatchCfgChecking: the same with a CFG function that checks for interrupts as upstream's
  code does, and so ends at Cancel by itself;
- ReturnForever: a function of the pack's (FUNCTION), returned to the host, that never
  returns when the host calls it;
- SampleForever: the host's MODEL patched so, sampled by the pack with upstream's
  nodes.common_ksampler, which runs in the host and calls the CFG function back: the host
  waits on the pack's node, which waits on the host's sampler, which waits on the pack's
  CFG function.
"""

import time

from comfy_supervisor.crossing.replicas import origin_of

CATEGORY = "comfy-supervisor tests"


def forever(*args, **kwargs):
    """Never returns and never checks for interrupts: only ending its worker stops it."""
    while True:
        time.sleep(0.01)


def until_interrupted(args):
    """Checks for interrupts as upstream's own loops do, and so ends at Cancel."""
    import comfy.model_management
    while True:
        comfy.model_management.throw_exception_if_processing_interrupted()
        time.sleep(0.01)


class PatchCfgForever:
    CATEGORY = CATEGORY
    FUNCTION = "patch"
    RETURN_TYPES = ("MODEL",)
    CFG_FUNCTION = staticmethod(forever)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",)}}

    def patch(self, model):
        # Cloned at the host, through the host's MODEL the replica stands for (and the same
        # for its clone): the host's sampler then samples it in the host and calls the CFG
        # function back. A clone of the replica would be the pack's, sampled in the pack.
        clone = (origin_of(model) or model).clone()
        patched = origin_of(clone) or clone
        patched.set_model_sampler_cfg_function(self.CFG_FUNCTION)
        return (patched,)


class PatchCfgChecking(PatchCfgForever):
    CFG_FUNCTION = staticmethod(until_interrupted)


class ReturnForever:
    CATEGORY = CATEGORY
    FUNCTION = "make"
    RETURN_TYPES = ("FUNCTION",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def make(self):
        return (forever,)


class SampleForever:
    CATEGORY = CATEGORY
    FUNCTION = "sample"
    RETURN_TYPES = ("LATENT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",), "positive": ("CONDITIONING",), "negative": ("CONDITIONING",),
                             "latent": ("LATENT",)}}

    def sample(self, model, positive, negative, latent):
        import nodes
        (patched,) = PatchCfgForever().patch(model)
        return nodes.common_ksampler(patched, 7, 3, 7.5, "euler", "normal", positive, negative, latent)


NODE_CLASS_MAPPINGS = {cls.__name__: cls for cls in (PatchCfgForever, PatchCfgChecking, ReturnForever, SampleForever)}
