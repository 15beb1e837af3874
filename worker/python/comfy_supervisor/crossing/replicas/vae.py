"""A VAE's replica: upstream's comfy.sd.VAE, built in the pack by upstream's own constructor
from what the host's was built from, its first_stage_model the owner's, mapped.

Upstream's VAE sets a score of attributes from its state dict as it is built, some of them
functions (memory_used_encode, process_input, a video VAE's downscale_ratio), so its
attributes cannot be sent: the replica is built by upstream's VAE(sd, device, config,
dtype, metadata) itself, over a state dict of meta tensors of the host's shapes and dtypes
(which is all upstream reads of it before it loads the weights), on the meta device: no
memory. Upstream keeps no state dict, so the host remembers each VAE's keys, shapes and
dtypes (never its tensors), config and metadata as upstream builds it (remember_builds).
The recipe is plain values: those, the devices and the dtype the host's VAE computes in.
"""

import importlib
import sys
import weakref

from ...bridge.mirror_build import on_meta
from ...bridge.remote import RemoteError, one_line, type_path_of
from .building import dtype_or_none, patcher_class, upstream_class, whole

VAE_MODULES = ("comfy.sd",)
FIRST_STAGE_MODEL = WEIGHTS = "first_stage_model"
_MAX_KEYS = 1 << 16
_MAX_DEPTH = 16

_builds = weakref.WeakKeyDictionary()  # upstream's VAE -> what it was built from, or why it cannot be replicated


# ---- the owner's side ----

def remember_builds():
    """Each VAE upstream builds in this process remembers what it was built from."""
    try:
        import comfy.sd as upstream_sd
    except ImportError:
        return  # a ComfyUI without VAEs has none to replicate
    original = upstream_sd.VAE.__init__

    def __init__(vae, sd=None, device=None, config=None, dtype=None, metadata=None, **kwargs):
        original(vae, sd=sd, device=device, config=config, dtype=dtype, metadata=metadata, **kwargs)
        _builds[vae] = _what_built(sd, config, metadata) if not kwargs else \
            f"built with arguments upstream's VAE had not in 0.3.64 ({', '.join(sorted(kwargs))})"

    upstream_sd.VAE.__init__ = __init__


def _what_built(sd, config, metadata):
    """The state dict's [key, shape, dtype] each, the config and the metadata as plain
    values; or why they are not plain."""
    torch = sys.modules["torch"]
    if not isinstance(sd, dict) or len(sd) > _MAX_KEYS:
        return "built from a state dict that is not a dict of tensors"
    shapes = []
    for key, tensor in sd.items():
        if not (isinstance(key, str) and isinstance(tensor, torch.Tensor)):
            return f"built from a state dict holding a {type(tensor).__name__} at {str(key)[:80]!r}"
        shapes.append([key, list(tensor.shape), tensor.dtype])
    try:
        return {"state_dict": shapes, "config": _plain(config, 0), "metadata": _plain(metadata, 0)}
    except ValueError as error:
        return str(error)


def _plain(value, depth):
    """A copy of `value`, plain data only (as JSON holds: a VAE's config and a file's
    metadata are); ValueError for anything else."""
    if depth > _MAX_DEPTH:
        raise ValueError("built from a config or metadata nested too deep")
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {key: _plain(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item, depth + 1) for item in value]
    if value is None or type(value) in (bool, int, float, str):
        return value
    raise ValueError(f"built from a config or metadata holding a {type(value).__name__}, not data")


def recipe(vae):
    """What the pack builds a replica of the host's VAE `vae` from."""
    what = "the host's VAE"
    path = type_path_of(vae)
    if path.rpartition(".")[0] not in VAE_MODULES:
        raise RemoteError(f"{what} is a {path[:120]}: a replica is built of upstream's comfy.sd.VAE")
    built = _builds.get(vae)
    if not isinstance(built, dict):
        raise RemoteError(f"{what} cannot be replicated: it was " +
                          (built or "not built by upstream's VAE in the host's process"))
    weights_of(vae)
    patcher = vae.patcher
    whole(patcher.model, what)
    return {"class": path, **built, "device": vae.device, "dtype": vae.vae_dtype,
            "load_device": patcher.load_device, "offload_device": patcher.offload_device}


def patcher_of(vae):
    return vae.patcher


def weights_of(vae):
    """The torch module of the host's VAE a replica maps: its first stage model."""
    module = getattr(vae, FIRST_STAGE_MODEL, None)
    if module is None:
        raise RemoteError("the host's VAE has no first_stage_model (upstream found no VAE weights in its file)")
    return module


def mirror_of(vae, grants):
    """The mirror of the host VAE's first stage model, which the pack built with upstream's VAE."""
    return grants.grant_built(weights_of(vae))


# ---- the pack's side ----

def build(proxy, recipe, weights):
    """Upstream's VAE of the host's VAE `proxy`, built by upstream's constructor from its
    recipe on the meta device, its first stage model the owner's."""
    what = "the host's VAE"
    torch = importlib.import_module("torch")
    vae_class = upstream_class(recipe.get("class"), VAE_MODULES, what)
    shapes = recipe.get("state_dict")
    if not (isinstance(shapes, list) and len(shapes) <= _MAX_KEYS and all(_entry(entry, torch) for entry in shapes)):
        raise RemoteError(f"{what}: the host's recipe of its replica has a malformed state dict")
    try:
        with on_meta(torch):
            sd = {key: torch.empty(shape, dtype=dtype, device="meta") for key, shape, dtype in shapes}
            vae = vae_class(sd=sd, device=recipe.get("device"), config=recipe.get("config"),
                            dtype=dtype_or_none(recipe.get("dtype"), what), metadata=recipe.get("metadata"))
    except RemoteError:
        raise
    except Exception as error:  # noqa: BLE001 (upstream's VAE refused the owner's state dict's shapes)
        raise RemoteError(f"{what}: upstream's VAE cannot be built here from its owner's state dict's shapes: "
                          f"{one_line(error)}") from None
    if getattr(vae, FIRST_STAGE_MODEL, None) is None:
        raise RemoteError(f"{what}: upstream's VAE here found no VAE in its owner's state dict's shapes")
    vae.first_stage_model = weights.built_module(vae, vae.first_stage_model)
    vae.patcher = patcher_class()(vae.first_stage_model, recipe.get("load_device"), recipe.get("offload_device"), 0)
    return vae


def _entry(entry, torch):
    return (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str) and
            isinstance(entry[1], list) and len(entry[1]) <= 32 and all(type(n) is int and n >= 0 for n in entry[1])
            and isinstance(entry[2], torch.dtype))
