"""A CLIP_VISION's replica: upstream's comfy.clip_vision.ClipVisionModel, its model built in
the pack by upstream's image encoder class from the configuration the host's was built
from, on the meta device, its tensors the owner's, mapped.

Upstream's ClipVisionModel(json_config) reads its configuration from a file, which the
pack must not open (the host's file, named by the host); so the replica is upstream's class
made without its __init__, given what that sets: the host's own image size, mean and std,
whether it returns all hidden states, its devices and dtype, and the model upstream's
__init__ builds, built here as it builds it (IMAGE_ENCODERS[model_type](config, dtype,
device, comfy.ops.manual_cast)) from the configuration the host remembered as it was built
(mirror_recipes.remember_clip_vision_config). Its encode_image then is upstream's.
"""

import importlib

from ...bridge.mirror_build import on_meta
from ...bridge.remote import RemoteError, one_line, type_path_of
from .. import mirror_recipes
from .building import dtype_or_none, patcher_class, upstream_class, whole

CLIP_VISION_MODULES = ("comfy.clip_vision",)
MODEL = WEIGHTS = "model"


# ---- the owner's side ----

def recipe(clip_vision):
    """What the pack builds a replica of the host's CLIP_VISION `clip_vision` from."""
    what = "the host's CLIP_VISION"
    path = type_path_of(clip_vision)
    if path.rpartition(".")[0] not in CLIP_VISION_MODULES:
        raise RemoteError(f"{what} is a {path[:120]}: a replica is built of upstream's "
                          "comfy.clip_vision.ClipVisionModel")
    config = mirror_recipes.clip_vision_config(clip_vision)
    if config is None:
        raise RemoteError(f"{what} cannot be replicated: it was not built by upstream's ClipVisionModel from a "
                          "configuration file in the host's process")
    patcher = clip_vision.patcher
    weights_of(clip_vision)
    whole(patcher.model, what)
    return {"class": path, "config": config, "image_size": clip_vision.image_size,
            "image_mean": list(clip_vision.image_mean), "image_std": list(clip_vision.image_std),
            "return_all_hidden_states": bool(clip_vision.return_all_hidden_states),
            "load_device": clip_vision.load_device, "offload_device": patcher.offload_device,
            "dtype": clip_vision.dtype}


def patcher_of(clip_vision):
    return clip_vision.patcher


def weights_of(clip_vision):
    """The torch module of the host's CLIP_VISION a replica maps: its model."""
    module = getattr(clip_vision, MODEL, None)
    if module is None or module is not getattr(clip_vision.patcher, "model", None):
        raise RemoteError("the host's CLIP_VISION's model is not the one its patcher loads: not replicated")
    return module


def mirror_of(clip_vision, grants):
    """The mirror of the host CLIP_VISION's model, which the pack built with upstream's class."""
    return grants.grant_built(weights_of(clip_vision))


# ---- the pack's side ----

def build(proxy, recipe, weights):
    """Upstream's ClipVisionModel of the host's CLIP_VISION `proxy`, from its recipe."""
    what = "the host's CLIP_VISION"
    torch = importlib.import_module("torch")
    cls = upstream_class(recipe.get("class"), CLIP_VISION_MODULES, what)
    config, dtype = recipe.get("config"), dtype_or_none(recipe.get("dtype"), what)
    model_type = config.get("model_type", "clip_vision_model") if isinstance(config, dict) else None
    model_class = getattr(importlib.import_module(cls.__module__), "IMAGE_ENCODERS", {}).get(model_type)
    if model_class is None:
        raise RemoteError(f"{what}: this worker's ComfyUI has no image encoder of type {str(model_type)[:80]} "
                          "(another version than the host's?)")
    replica = object.__new__(cls)  # upstream's __init__ reads the host's file: what it sets, set from the recipe
    replica.image_size = recipe.get("image_size")
    replica.image_mean, replica.image_std = recipe.get("image_mean"), recipe.get("image_std")
    replica.return_all_hidden_states = bool(recipe.get("return_all_hidden_states"))
    replica.load_device, replica.dtype = recipe.get("load_device"), dtype
    operations = mirror_recipes.operations({"operations": "manual_cast"}, dtype)
    try:
        with on_meta(torch):  # the layers are shapes, never memory
            model = model_class(config, dtype, None, operations)
    except Exception as error:  # noqa: BLE001 (upstream's class refused the owner's configuration)
        raise RemoteError(f"{what}: {model_class.__module__}.{model_class.__qualname__} cannot be built here from its owner's "
                          f"configuration: {one_line(error)}"
                          ) from None
    replica.model = weights.built_module(replica, model.eval())
    replica.patcher = patcher_class()(replica.model, recipe.get("load_device"), recipe.get("offload_device"), 0)
    return replica
