"""How a module the rules mirror (kinds.MIRRORS) is described by its owner and built by
its reader with upstream's own code (docs/PACKS.md, "Mirrors"; the mapping, the checks and
the revocation: bridge/mirror.py).

A recipe is the module's class, one of ComfyUI's own torch modules (CLASS_MODULES), never
code, and its construction arguments as plain values, as upstream builds it: a diffusion
model as upstream's BaseModel builds it, a CLIP vision model as upstream's
ClipVisionModel does. A ComfyUI module mirrored anew is a line in kinds.MIRRORS and its
recipe here. The bridge calls recipe_of at the owner, and well_formed, mirrored_class and
operations at the reader.
"""

import json
import sys
import weakref

from ..bridge.remote import RemoteError, type_path_of

# Where the class of a mirrored module may come from: ComfyUI's own torch modules (the
# receiver builds it with upstream's code from plain construction arguments, never code).
# A replica's module (a VAE's first stage model, a CLIP's text encoder) is built by its
# reader with upstream's constructor of the object that holds it, from no recipe of ours.
CLASS_MODULES = ("comfy.ldm.", "comfy.clip_model.", "comfy.image_encoders.")


_clip_vision_configs = weakref.WeakKeyDictionary()  # upstream's ClipVisionModel -> its configuration


def remember_clip_vision_config(clip_vision, json_config):
    """Upstream's ClipVisionModel(json_config) reads its model's configuration from a file and
    keeps only a few fields of it; host/comfyui.py calls this as each is built, so that its
    mirror's recipe has the whole (the file may be gone by then: read now)."""
    try:
        with open(json_config) as source:
            config = json.load(source)
    except (OSError, TypeError, ValueError):
        return  # upstream read it too, and raised: no model to mirror
    if isinstance(config, dict):
        _clip_vision_configs[clip_vision] = config


def clip_vision_config(clip_vision):
    """The configuration upstream's ClipVisionModel `clip_vision` was built from, or None
    (its replica's recipe, crossing/replicas/clip_vision.py)."""
    return _clip_vision_configs.get(clip_vision)


def recipe_of(owner, kind, name, module):
    """How the receiver builds `module` with upstream's own code: its class (one of ComfyUI's
    torch modules) and its construction arguments, as upstream builds it."""
    path = type_path_of(module)
    if not mirrored_class(path):
        raise RemoteError(f"{name} of the {kind.name} is a {path}, which is not mirrored (classes of "
                          f"{', '.join(CLASS_MODULES)} are)")
    if kind.name == "CLIP_VISION":
        return _clip_vision_recipe(owner, kind, name, module, path)
    return _diffusion_model_recipe(owner, kind, name, module, path)


def _clip_vision_recipe(owner, kind, name, module, path):
    """As upstream's ClipVisionModel builds its model: model_class(config, dtype, device,
    comfy.ops.manual_cast), from the configuration it was built from."""
    config = clip_vision_config(owner)
    if config is None:
        raise RemoteError(f"{name} of the {kind.name} cannot be mirrored: it was not built by upstream's "
                          "ClipVisionModel from a configuration file in its owner's process")
    return {"class": path, "kwargs": {"config_dict": config, "dtype": getattr(owner, "dtype", None)},
            "operations": "manual_cast", "training": bool(module.training)}


def _diffusion_model_recipe(owner, kind, name, module, path):
    """As upstream's BaseModel builds its diffusion model: unet_model(**model_config.unet_config,
    device=..., operations=...), the operations upstream's pick_operations(unet_config's dtype,
    manual_cast_dtype, fp8_optimizations=model_config.optimizations["fp8"],
    scaled_fp8=model_config.scaled_fp8) unless the model config names custom operations (an
    object: not mirrored)."""
    model_config = getattr(owner, "model_config", None)
    config = getattr(model_config, "unet_config", None)
    if not isinstance(config, dict):
        raise RemoteError(f"{name} of the {kind.name} cannot be mirrored: its model has no model_config.unet_config "
                          "to build it from")
    custom = getattr(model_config, "custom_operations", None)
    if custom is not None:
        custom = f"{custom.__module__}.{custom.__qualname__}" if isinstance(custom, type) else type_path_of(custom)
        raise RemoteError(f"{name} of the {kind.name} cannot be mirrored: its model's layers are custom operations "
                          f"({custom[:120]}), not upstream's choice")
    optimizations = getattr(model_config, "optimizations", None)
    return {"class": path, "kwargs": dict(config), "manual_cast_dtype": getattr(owner, "manual_cast_dtype", None),
            "fp8_optimizations": bool(isinstance(optimizations, dict) and optimizations.get("fp8", False)),
            "scaled_fp8": getattr(model_config, "scaled_fp8", None), "training": bool(module.training)}


def mirrored_class(path):
    """Whether `path` ("module.Class") names a class a mirror may be built of."""
    return path.startswith(CLASS_MODULES)


def well_formed(recipe):
    """Whether the recipe's fields beyond its class, arguments and training are upstream's:
    its fixed choice of operations, or what upstream picks them from."""
    import torch
    return (recipe.get("operations") in (None, "manual_cast") and
            type(recipe.get("fp8_optimizations", False)) is bool and
            all(recipe.get(k) is None or isinstance(recipe.get(k), torch.dtype)
                for k in ("manual_cast_dtype", "scaled_fp8")))


def operations(recipe, dtype):
    """The layer operations the module is built with: upstream's fixed choice (a CLIP vision
    model's manual_cast), or upstream's own pick for the model's `dtype`."""
    if recipe.get("operations") == "manual_cast":
        return getattr(_upstream_ops(), "manual_cast", None)
    return _operations(dtype, recipe)


def _upstream_ops():
    """Upstream's comfy.ops, or None in a ComfyUI without it."""
    ops = sys.modules.get("comfy.ops")
    if ops is None:
        try:
            import comfy.ops as ops
        except ImportError:
            return None
    return ops


def _operations(dtype, recipe):
    """Upstream's choice of layer operations for the model, made here by upstream's code with
    the arguments upstream's BaseModel gives it."""
    pick = getattr(_upstream_ops(), "pick_operations", None)
    if pick is None:
        return None
    fp8, scaled = recipe.get("fp8_optimizations", False), recipe.get("scaled_fp8")
    extra = {"fp8_optimizations": fp8, "scaled_fp8": scaled} if fp8 or scaled is not None else {}
    return pick(dtype, recipe.get("manual_cast_dtype"), **extra)
