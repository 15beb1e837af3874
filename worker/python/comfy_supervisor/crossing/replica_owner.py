"""The host's side of a replica of its MODEL in a pack's worker (crossing/replica.py,
docs/PACKS.md, "Replicas"): the recipe the pack builds it from, and the loads it asks for.

The recipe is plain values and the host's own objects, never code: upstream's class of the
model and of its configuration, by module and name, within comfy.model_base and
comfy.supported_models; the configuration's values; the devices; the object patches (the
host's objects, which cross as remote objects). The weights are not in it: the pack maps
them (a mirror) after asking the host to load them.

A load is the host's own: upstream's load_models_gpu of the MODEL, through the host's
admission, with the weight patches the pack added applied to a clone of it, which the host
keeps loaded for that pack's session until it asks for another. A copy of the model's
weights made for a pack before the load and no longer theirs (the patches changed them) is
revoked, so that the pack maps them again.
"""

import sys
import threading
import uuid
import weakref

from ..bridge import mirror, rules
from ..bridge.remote import RemoteError, refused, type_path_of
from .replica import BASE_MODULES, CONFIG_MODULES, DIFFUSION_MODEL

# A weight patch as upstream's add_patches stores it: (strength_patch, value, strength_model,
# offset, function).
_PATCH_FIELDS = 5
_MAX_PATCH_KEYS = 1 << 16


def uses():
    """The uses of the host's objects a pack's conversation serves for its replicas."""
    return {"replica": lambda target, kind, args, conversation: recipe(target, kind),
            "replica_mirror": lambda target, kind, args, conversation: mirror_of(target, kind, conversation),
            "load_replica": lambda target, kind, args, conversation: load(target, kind, args[0] if args else None,
                                                                          conversation),
            "closed": forget}


def recipe(patcher, kind):
    """What the pack builds a replica of the host's MODEL `patcher` from."""
    if kind.name != "MODEL":
        raise RemoteError(f"a {kind.name} has no replica here (a MODEL has)")
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
    if getattr(model, "model_lowvram", False):
        raise RemoteError(f"{what} is loaded in part (lowvram): a replica maps a whole model; give ComfyUI more "
                          "memory or run the pack's node in ComfyUI's process")
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


def mirror_of(patcher, kind, conversation):
    """The mirror of the host MODEL `patcher`'s diffusion model for its replica: as upstream
    built it, the blocks that object patches replaced for now (the patcher's and its
    clones' backup of them: a pack's wrapper a sampling in this process set) in their place."""
    if kind.name != "MODEL":
        raise RemoteError(f"a {kind.name} has no replica here (a MODEL has)")
    if not _in(type_path_of(patcher.model), BASE_MODULES):  # a CLIP's or a CLIP vision's patcher
        raise RemoteError(f"the host's MODEL ({type(patcher.model).__name__}): a replica is built of upstream's "
                          "comfy.model_base classes")
    prefix = f"{DIFFUSION_MODEL}."
    originals = {path[len(prefix):]: original for path, original in dict(patcher.object_patches_backup).items()
                 if isinstance(path, str) and path.startswith(prefix)}
    return conversation.session.grants.grant(patcher.model, rules.by_name["DIFFUSION_MODEL"], DIFFUSION_MODEL,
                                             originals)


_held = weakref.WeakKeyDictionary()  # a pack's conversation -> {id of the host's MODEL: the clone loaded for it}
_held_lock = threading.Lock()


def load(patcher, kind, patches, conversation):
    """Loads the host's MODEL `patcher` for the pack's replica, with the pack's weight
    `patches` (upstream's add_patches form) applied to a clone of it."""
    if kind.name != "MODEL":
        raise refused(conversation.peer, f"a {kind.name} has no replica here (a MODEL has)")
    mm = sys.modules["comfy.model_management"]
    model = patcher
    if patches:
        try:
            checked = _checked(patches, patcher)
        except RemoteError as error:  # what the pack sent: refused, and said in the host's log with its name
            raise refused(conversation.peer, str(error)) from None
        model = patcher.clone()
        for key, entries in checked.items():
            model.patches[key] = model.patches.get(key, []) + entries
        model.patches_uuid = uuid.uuid4()
    mm.load_models_gpu([model])  # `model` is held here meanwhile (upstream's list holds it weakly)
    with _held_lock:
        held = _held.setdefault(conversation, {})
        if model is patcher:
            held.pop(id(patcher), None)
        else:
            held[id(patcher)] = model  # loaded until the pack asks for another, or its session ends
    diffusion_model = getattr(model.model, "diffusion_model", None)
    for publication in mirror.publications_of(diffusion_model):
        if not publication.current():
            publication.revoke()


def forget(conversation):
    """The pack's session ended: the clones loaded for it are the host's to let go."""
    with _held_lock:
        _held.pop(conversation, None)


def _checked(patches, patcher):
    """The pack's weight patches, each on a weight of the model, as upstream stores them; one
    line for anything else. A patch's value is data (tensors, numbers, names, tuples of
    them): an adapter object of the pack's crosses as a handle and is refused here."""
    torch = sys.modules["torch"]
    if not isinstance(patches, dict) or len(patches) > _MAX_PATCH_KEYS:
        raise RemoteError(f"a replica's weight patches are not a dict of at most {_MAX_PATCH_KEYS} weights to their "
                          "patches")
    weights = patcher.model.state_dict(keep_vars=True)
    checked = {}
    for key, entries in patches.items():
        if key not in weights:
            raise RemoteError(f"a replica's weight patch of {str(key)[:120]!r}, which the host's MODEL has no "
                              "weight of")
        if not isinstance(entries, list) or not all(isinstance(e, (list, tuple)) and len(e) == _PATCH_FIELDS
                                                    for e in entries):
            raise RemoteError(f"a replica's weight patches of {key[:120]} are not upstream's (strength, value, "
                              "strength_model, offset, function) entries")
        for entry in entries:
            # A value is a tuple of data or a tensor (a list is upstream's form whose head holds
            # a function: get_key_patches').
            if entry[4] is not None or not isinstance(entry[1], (tuple, torch.Tensor)) or \
                    not _data(entry[1], torch, 0):
                raise RemoteError(f"a replica's weight patch of {key[:120]} holds a {type(entry[1]).__name__}, not "
                                  "tensors and numbers: load the LoRA with the host's MODEL (comfy.sd's "
                                  "load_lora_for_models) instead")
            # Upstream multiplies by the strengths and narrows the weight by the offset.
            if not (_number(entry[0]) and _number(entry[2]) and _offset(entry[3])):
                raise RemoteError(f"a replica's weight patch of {key[:120]} has strengths or offset that are not "
                                  "numbers (two numbers, and None or three integers)")
        checked[key] = [tuple(entry) for entry in entries]
    return checked


def _number(value):
    return type(value) in (int, float)


def _offset(value):
    return value is None or (isinstance(value, (list, tuple)) and len(value) == 3 and
                             all(type(n) is int for n in value))


def _data(value, torch, depth):
    if depth > 8:
        return False
    if isinstance(value, (list, tuple)):
        return all(_data(item, torch, depth + 1) for item in value)
    return value is None or isinstance(value, (bool, int, float, str, torch.Tensor))
