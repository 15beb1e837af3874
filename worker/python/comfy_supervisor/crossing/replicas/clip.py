"""A CLIP's replica: upstream's comfy.sd.CLIP, filled in the pack as upstream's clone() fills
one, its text encoder built by upstream's own class on the meta device from what the host's
was built from, its weights the owner's, mapped; its tokenizer upstream's, built here.

Upstream's CLIP keeps neither its ClipTarget nor the arguments it built its text encoder and
tokenizer with, so the host remembers them as upstream builds each CLIP (remember_builds):
the classes, which must be module-level classes of upstream's text encoder modules (a class
made inside a function, as SD3's and Flux's loaders make theirs, or a functools.partial, is
not rebuilt: the proxy serves), the text encoder's arguments (the target's params, the
dtype, the model options) and, of the tokenizer's tokenizer_data, only what the tokenizer
read of it (a checkpoint's loader hands it the whole CLIP state dict). Both are remembered
by the objects themselves, which upstream's clone() shares, so a clone of a host CLIP has
its recipe too.

The recipe is plain values (and the hook group the host's CLIP applies to conditionings, a
host object, which crosses as a remote object): a CLIP whose text encoder options hold an
object (custom operations), or whose patcher carries hooks, object patches, wrappers or
callbacks, is not replicated. The host's own weight patches (a LoRA it loaded) are not in
it: the host applies them when the replica loads, with the pack's (owner.py's load).
"""

import functools
import importlib
import sys
import weakref

from ...bridge.mirror_build import on_meta
from ...bridge.remote import RemoteError, one_line
from .building import patcher_class, upstream_class, whole

# Where the text encoder and tokenizer classes a recipe names may come from: upstream's own
# modules, imported by name here, never code the owner sent.
TEXT_ENCODER_MODULES = ("comfy.sd1_clip", "comfy.sdxl_clip")
TEXT_ENCODER_PACKAGE = "comfy.text_encoders."
CLIP_MODULES = ("comfy.sd",)
COND_STAGE_MODEL = WEIGHTS = "cond_stage_model"
_MAX_DEPTH = 16
_MAX_ITEMS = 1 << 16

# upstream's text encoder -> ((its class's path, or None and why), the arguments upstream built it with)
_encoders = weakref.WeakKeyDictionary()
# upstream's tokenizer -> ((its class's path, or None and why), embedding_directory, what it read of tokenizer_data)
_tokenizers = weakref.WeakKeyDictionary()


# ---- the owner's side ----

def remember_builds():
    """Each CLIP upstream builds in this process remembers what its text encoder and
    tokenizer were built from."""
    try:
        import comfy.sd as upstream_sd
    except ImportError:
        return  # a ComfyUI without CLIPs has none to replicate
    original = upstream_sd.CLIP.__init__

    @functools.wraps(original)
    def __init__(clip, target=None, *args, **kwargs):
        recording = _Recording(target) if target is not None else None
        original(clip, recording if recording is not None else target, *args, **kwargs)
        if recording is not None:
            recording.remember(clip)

    upstream_sd.CLIP.__init__ = __init__


class _Recording:
    """A ClipTarget as upstream's CLIP reads it (params, clip, tokenizer), which notes the
    arguments upstream builds the target's classes with."""

    def __init__(self, target):
        self.target = target
        self.params = target.params
        self.built = self.tokenized = None

    def clip(self, **params):
        self.built = params
        return self.target.clip(**params)

    def tokenizer(self, embedding_directory=None, tokenizer_data=None, **kwargs):
        read = _Reads(tokenizer_data or {})
        self.tokenized = (embedding_directory, read, kwargs)
        return self.target.tokenizer(embedding_directory=embedding_directory, tokenizer_data=read, **kwargs)

    def remember(self, clip):
        encoder, tokenizer = getattr(clip, COND_STAGE_MODEL, None), getattr(clip, "tokenizer", None)
        if self.built is not None and encoder is not None:
            params = {key: value for key, value in self.built.items() if key != "device"}  # the pack's is meta
            _encoders[encoder] = (_class_path(self.target.clip), params)
        if self.tokenized is not None and tokenizer is not None:
            embedding_directory, read, kwargs = self.tokenized
            path = _class_path(self.target.tokenizer) if not kwargs else \
                (None, f"built with arguments upstream's CLIP gave none in 0.3.64 ({', '.join(sorted(kwargs))})")
            _tokenizers[tokenizer] = (path, embedding_directory, {key: read[key] for key in read.seen if key in read})


class _Reads(dict):
    """tokenizer_data as upstream's tokenizers read it, noting each key they read."""

    def __init__(self, data):
        super().__init__(data)
        self.seen = set()

    def get(self, key, default=None):
        self.seen.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.seen.add(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self.seen.add(key)
        return super().__contains__(key)


def _class_path(cls):
    """("module.Class", None) of a module-level class of upstream's text encoder modules, or
    (None, what it is instead)."""
    module = sys.modules.get(getattr(cls, "__module__", None) or "")
    name = getattr(cls, "__qualname__", "")
    if not isinstance(cls, type) or module is None or getattr(module, name, None) is not cls:
        return None, f"a {type(cls).__name__} {str(name)[:80]}, not a module-level class"
    path = f"{cls.__module__}.{name}"
    return (path, None) if _text_encoder_module(cls.__module__) else (None, f"a {path[:120]}")


def _text_encoder_module(name):
    return name in TEXT_ENCODER_MODULES or (name.startswith(TEXT_ENCODER_PACKAGE) and
                                            "." not in name[len(TEXT_ENCODER_PACKAGE):])


_MODULES_SAID = f"{', '.join(TEXT_ENCODER_MODULES)} or {TEXT_ENCODER_PACKAGE}*"


def recipe(clip):
    """What the pack builds a replica of the host's CLIP `clip` from."""
    what = "the host's CLIP"
    encoder, tokenizer = _encoders.get(weights_of(clip)), _tokenizers.get(getattr(clip, "tokenizer", None))
    if encoder is None or tokenizer is None:
        raise RemoteError(f"{what} was not built by upstream's comfy.sd.CLIP from a ClipTarget in its owner's "
                          "process, so a pack cannot build it again")
    for part, (path, instead) in (("text encoder", encoder[0]), ("tokenizer", tokenizer[0])):
        if path is None:
            raise RemoteError(f"{what}: its {part} is {instead}; a replica is built of upstream's module-level "
                              f"classes of {_MODULES_SAID}")
    patcher = patcher_of(clip)
    whole(patcher.model, what)
    carried = [name for name in ("object_patches", "hook_patches", "wrappers", "callbacks", "additional_models",
                                 "injections") if getattr(patcher, name, None)]
    if getattr(patcher, "forced_hooks", None) is not None:
        carried.append("forced_hooks")
    if carried:
        raise RemoteError(f"{what}: its patcher carries {', '.join(carried)}, which a replica of a CLIP does not "
                          "carry; run the pack's node in ComfyUI's process to use them")
    return {"clip": encoder[0][0], "params": _plain(encoder[1], "its text encoder's arguments"),
            "tokenizer": tokenizer[0][0], "embedding_directory": _plain(tokenizer[1], "its embedding directory"),
            "tokenizer_data": _plain(tokenizer[2], "its tokenizer's data"),
            "load_device": patcher.load_device, "offload_device": patcher.offload_device,
            "weight_inplace_update": bool(getattr(patcher, "weight_inplace_update", False)),
            "model_options": _plain(patcher.model_options, "its patcher's model_options"),
            "hook_mode": patcher.hook_mode, "layer_idx": _plain(clip.layer_idx, "its layer_idx"),
            "use_clip_schedule": bool(clip.use_clip_schedule),
            "tokenizer_options": _plain(clip.tokenizer_options, "its tokenizer_options"),
            "apply_hooks_to_conds": getattr(clip, "apply_hooks_to_conds", None)}


def _plain(value, where, depth=0):
    """`value` if it is data (numbers, strings, dtypes, devices, tensors, lists and dicts of
    them); one line naming `where` otherwise."""
    torch = sys.modules["torch"]
    if depth > _MAX_DEPTH:
        raise RemoteError(f"the host's CLIP: {where} nest too deep to build a replica from")
    if isinstance(value, dict) and len(value) <= _MAX_ITEMS and all(isinstance(key, str) for key in value):
        return {key: _plain(item, where, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple)) and len(value) <= _MAX_ITEMS:
        return type(value)(_plain(item, where, depth + 1) for item in value)
    if value is None or type(value) in (bool, int, float, str) or \
            isinstance(value, (torch.dtype, torch.device, torch.Tensor)):
        return value
    raise RemoteError(f"the host's CLIP: {where} hold a {type(value).__name__}, not data, and a replica is built "
                      "from data only")


def patcher_of(clip):
    return clip.patcher


def weights_of(clip):
    """The torch module of the host's CLIP a replica maps: its text encoder."""
    encoder = getattr(clip, COND_STAGE_MODEL, None)
    torch = sys.modules["torch"]
    if not isinstance(encoder, torch.nn.Module):
        raise RemoteError(f"the host's CLIP ({type(clip).__name__}) has no text encoder to replicate")
    return encoder


def mirror_of(clip, grants):
    """The mirror of the host CLIP's text encoder, which the pack built itself."""
    return grants.grant_built(weights_of(clip))


# ---- the pack's side ----

def build(proxy, recipe, weights):
    """Upstream's CLIP of the host's CLIP `proxy`, filled from its recipe as upstream's clone()
    fills one."""
    what = "the host's CLIP"
    torch = importlib.import_module("torch")
    clip_class = upstream_class(recipe.get("clip"), _modules_for(recipe.get("clip")), what)
    tokenizer_class = upstream_class(recipe.get("tokenizer"), _modules_for(recipe.get("tokenizer")), what)
    params, tokenizer_data = recipe.get("params"), recipe.get("tokenizer_data")
    if not isinstance(params, dict) or not isinstance(tokenizer_data, dict):
        raise RemoteError(f"{what}: the host's recipe of its replica is malformed (params, tokenizer_data)")
    try:
        # On the meta device: the layers upstream builds are shapes only, never memory.
        with on_meta(torch):
            encoder = clip_class(**params, device=torch.device("meta"))
        tokenizer = tokenizer_class(embedding_directory=recipe.get("embedding_directory"),
                                    tokenizer_data=dict(tokenizer_data))
    except Exception as error:  # noqa: BLE001 (upstream's class refused the owner's arguments)
        raise RemoteError(f"{what}: {recipe.get('clip')} cannot be built here from its owner's arguments: "
                          f"{one_line(error)}") from None
    replica = upstream_class("comfy.sd.CLIP", CLIP_MODULES, what)(no_init=True)
    # Kept while the tokenizer lives: upstream's clone() shares it, and the mirror holds the
    # text encoder itself, so a clone the pack keeps keeps the weights mapped.
    replica.cond_stage_model = weights.built_module(tokenizer, encoder)
    replica.tokenizer = tokenizer
    importlib.import_module("comfy.model_patcher")
    patcher = patcher_class()(replica.cond_stage_model, recipe.get("load_device"), recipe.get("offload_device"), 0,
                              weight_inplace_update=bool(recipe.get("weight_inplace_update")))
    if isinstance(recipe.get("model_options"), dict):
        patcher.model_options = recipe["model_options"]
    if recipe.get("hook_mode") is not None:
        patcher.hook_mode = recipe["hook_mode"]
    patcher.is_clip = True
    replica.patcher = patcher
    replica.layer_idx = recipe.get("layer_idx")
    replica.use_clip_schedule = bool(recipe.get("use_clip_schedule"))
    replica.tokenizer_options = dict(recipe.get("tokenizer_options") or {})
    replica.apply_hooks_to_conds = recipe.get("apply_hooks_to_conds")
    return replica


def _modules_for(path):
    """The upstream modules a recipe's class `path` may be looked up in."""
    module = str(path or "").rpartition(".")[0]
    return (module,) if _text_encoder_module(module) else TEXT_ENCODER_MODULES
