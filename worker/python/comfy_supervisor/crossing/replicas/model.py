"""A MODEL's replica: upstream's ModelPatcher (ReplicaPatcher) over the host model's own
comfy.model_base class, built by upstream's constructors from the model's configuration,
its diffusion model the owner's, mapped.

The recipe is plain values and the host's own objects, never code: upstream's class of the
model and of its configuration, by module and name, within comfy.model_base and
comfy.supported_models; the configuration's values; the devices; the object patches (the
host's objects, which cross as remote objects). Its model_options are the host's, read as
the proxy reads them: a change the pack makes in place during the node call is set back on
the host's MODEL, as in one process; the host's functions in them are callbacks.
"""

import importlib

from ...bridge import rules
from ...bridge.remote import RemoteError, one_line, type_path_of
from .building import dtype_or_none, patcher_class, upstream_class, whole

# Where the classes a recipe names may come from: upstream's model and model configuration
# modules, imported by name here, never code the owner sent.
BASE_MODULES = ("comfy.model_base",)
CONFIG_MODULES = ("comfy.supported_models", "comfy.supported_models_base")
DIFFUSION_MODEL = WEIGHTS = "diffusion_model"


# ---- the owner's side ----

def recipe(patcher):
    """What the pack builds a replica of the host's MODEL `patcher` from."""
    model = patcher.model
    what = f"the host's MODEL ({type(model).__name__})"
    base = type_path_of(model)
    config = getattr(model, "model_config", None)
    config_path = type_path_of(config)
    if not _in(base, BASE_MODULES) or not _in(config_path, CONFIG_MODULES):
        raise RemoteError(f"{what} is a {base[:120]} configured by a {config_path[:120]}: a replica is built of "
                          "upstream's comfy.model_base classes configured by comfy.supported_models")
    if getattr(config, "custom_operations", None) is not None:
        raise RemoteError(f"{what}: its layers are custom operations, not upstream's choice, and are not replicated")
    whole(model, what)
    optimizations = getattr(config, "optimizations", None)
    return {"base": base, "config": config_path, "unet_config": dict(config.unet_config),
            "model_type": getattr(model.model_type, "name", None), "manual_cast_dtype": model.manual_cast_dtype,
            "scaled_fp8": getattr(config, "scaled_fp8", None),
            "optimizations": dict(optimizations) if isinstance(optimizations, dict) else None,
            "load_device": patcher.load_device, "offload_device": patcher.offload_device,
            "weight_inplace_update": bool(patcher.weight_inplace_update),
            "object_patches": dict(patcher.object_patches), "hook_mode": patcher.hook_mode}


def _in(type_path, modules):
    """Whether the class `type_path` names is one of `modules`' own, as the pack looks it up."""
    return type_path.rpartition(".")[0] in modules


def patcher_of(patcher):
    return patcher


def weights_of(patcher):
    """The torch module of the host's MODEL a replica maps: its diffusion model."""
    if not _in(type_path_of(patcher.model), BASE_MODULES):  # a CLIP's or a CLIP vision's patcher
        raise RemoteError(f"the host's MODEL ({type(patcher.model).__name__}): a replica is built of upstream's "
                          "comfy.model_base classes")
    return getattr(patcher.model, DIFFUSION_MODEL)


def mirror_of(patcher, grants):
    """The mirror of the host MODEL `patcher`'s diffusion model for its replica: as upstream
    built it, the blocks that object patches replaced for now (the patcher's and its
    clones' backup of them: a pack's wrapper a sampling in this process set) in their place."""
    weights_of(patcher)
    prefix = f"{DIFFUSION_MODEL}."
    originals = {path[len(prefix):]: original for path, original in dict(patcher.object_patches_backup).items()
                 if isinstance(path, str) and path.startswith(prefix)}
    return grants.grant(patcher.model, rules.by_name["DIFFUSION_MODEL"], DIFFUSION_MODEL, originals)


# ---- the pack's side ----

def build(proxy, recipe, weights):
    """A ReplicaPatcher over upstream's BaseModel of the host's MODEL `proxy`, from its recipe."""
    what = "the host's MODEL"
    torch = importlib.import_module("torch")
    model_type = getattr(importlib.import_module("comfy.model_base").ModelType, str(recipe.get("model_type")), None)
    config_class = upstream_class(recipe.get("config"), CONFIG_MODULES, what)
    base_class = upstream_class(recipe.get("base"), BASE_MODULES, what)
    unet_config = recipe.get("unet_config")
    if model_type is None or not isinstance(unet_config, dict):
        raise RemoteError(f"{what}: the host's recipe of its replica is malformed (model_type, unet_config)")
    config = config_class(dict(unet_config))
    config.unet_config = dict(unet_config)  # the host's, whatever defaults the class adds
    config.manual_cast_dtype = dtype_or_none(recipe.get("manual_cast_dtype"), what)
    config.scaled_fp8 = dtype_or_none(recipe.get("scaled_fp8"), what)
    if isinstance(recipe.get("optimizations"), dict):
        config.optimizations = dict(recipe["optimizations"])
    try:
        # On the meta device: the layers upstream builds are shapes only, never memory.
        base = base_class(config, model_type=model_type, device=torch.device("meta"))
    except Exception as error:  # noqa: BLE001 (upstream's class refused the owner's configuration)
        raise RemoteError(f"{what}: {recipe.get('base')} cannot be built here from its owner's configuration: "
                          f"{one_line(error)}") from None
    base.device = recipe.get("offload_device")
    base.diffusion_model = weights.module(base)
    weights.under(base)
    importlib.import_module("comfy.model_patcher")
    patcher = patcher_class()(base, recipe.get("load_device"), recipe.get("offload_device"), 0,
                              weight_inplace_update=bool(recipe.get("weight_inplace_update")))
    patcher.model_options = proxy.model_options
    object_patches = recipe.get("object_patches")
    patcher.object_patches = dict(object_patches) if isinstance(object_patches, dict) else {}
    if recipe.get("hook_mode") is not None:
        patcher.hook_mode = recipe["hook_mode"]
    return patcher

