"""The host's side of its models' replicas in a pack's worker (docs/PACKS.md, "Replicas"):
the recipe each kind's replica is built from (that kind's module here), the mirror of its
weights, and the loads a replica asks for.

A recipe is plain values and the host's own objects, never code; the weights are not in it:
the pack maps them (a mirror) after asking the host to load them.

A load is the host's own: upstream's load_models_gpu of the model's patcher, through the
host's admission, with the weight patches the pack added applied to a clone of it, which
the host keeps loaded for that pack's session until it asks for another. A copy of the
model's weights made for a pack before the load and no longer theirs (the patches changed
them) is revoked, so that the pack maps them again.

A use of a kind that has no replica, and weight patches that are not data, are refused in
one line and said in the host's log with the pack's name, as every refusal of what a pack
sent is; an object its kind's module cannot replicate is said to the pack alone, whose
proxy then serves.
"""

import sys
import threading
import uuid
import weakref

from ...bridge import mirror
from ...bridge.remote import RemoteError, link_of, refused
from ..by_value_classes import ADAPTERS
from . import REPLICATED

# A weight patch as upstream's add_patches stores it: (strength_patch, value, strength_model,
# offset, function).
_PATCH_FIELDS = 5
_MAX_PATCH_KEYS = 1 << 16


def uses():
    """The uses of the host's objects a pack's conversation serves for its replicas."""
    return {"replica": lambda target, kind, args, conversation: _of(kind, conversation, "recipe")(target),
            "replica_mirror": lambda target, kind, args, conversation: _of(kind, conversation, "mirror_of")(
                target, conversation.session.grants),
            "load_replica": lambda target, kind, args, conversation: load(target, kind, args[0] if args else None,
                                                                          conversation),
            "closed": forget}


def _of(kind, conversation, name):
    """The function `name` of `kind`'s replica module. A kind with none is refused, and said
    in the host's log: no replica of the pack's asks for it. An object of a replicated kind
    that its module cannot replicate raises a plain RemoteError: the pack's proxy serves."""
    module = REPLICATED.get(kind.name)
    if module is None:
        raise refused(conversation.peer, f"a {kind.name} has no replica here (a {', '.join(REPLICATED)} has)")
    function = getattr(module, name)

    def of_ours(target, *args):
        relayed = link_of(target)
        if relayed is not None:  # another pack's, lent on (bridge/conversation.py's relays)
            raise RemoteError(f"{relayed.describe()} is another pack's: it has no replica, and each use of it is "
                              "asked of its owner")
        return function(target, *args)

    return of_ours


_held = weakref.WeakKeyDictionary()  # a pack's conversation -> {id of the host's MODEL: the clone loaded for it}
_held_lock = threading.Lock()


def load(target, kind, patches, conversation):
    """Loads the host's model `target` for the pack's replica, with the pack's weight
    `patches` (upstream's add_patches form) applied to a clone of its patcher."""
    patcher = _of(kind, conversation, "patcher_of")(target)
    weights = _of(kind, conversation, "weights_of")(target)
    mm = sys.modules["comfy.model_management"]
    model = patcher
    if patches:
        try:
            checked = _checked(patches, patcher, kind.name)
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
    for publication in mirror.publications_of(weights):
        if not publication.current():
            publication.revoke()


def forget(conversation):
    """The pack's session ended: the clones loaded for it are the host's to let go."""
    with _held_lock:
        _held.pop(conversation, None)


def _checked(patches, patcher, kind):
    """The pack's weight patches, each on a weight of the model (of `kind`), as upstream
    stores them; one line for anything else. A patch's value is data (tensors, numbers,
    names, tuples of them), or one of upstream's weight adapters over such data (a LoRA's,
    as upstream's load_lora makes it: it crosses by value, crossing/by_value_classes.py);
    any other object of the pack's crosses as a handle and is refused here."""
    torch = sys.modules["torch"]
    if not isinstance(patches, dict) or len(patches) > _MAX_PATCH_KEYS:
        raise RemoteError(f"a replica's weight patches are not a dict of at most {_MAX_PATCH_KEYS} weights to their "
                          "patches")
    weights = patcher.model.state_dict(keep_vars=True)
    checked = {}
    for key, entries in patches.items():
        if key not in weights:
            raise RemoteError(f"a replica's weight patch of {str(key)[:120]!r}, which the host's {kind} has no "
                              "weight of")
        if not isinstance(entries, list) or not all(isinstance(e, (list, tuple)) and len(e) == _PATCH_FIELDS
                                                    for e in entries):
            raise RemoteError(f"a replica's weight patches of {key[:120]} are not upstream's (strength, value, "
                              "strength_model, offset, function) entries")
        for entry in entries:
            # A value is a tuple of data or a tensor (a list is upstream's form whose head holds
            # a function: get_key_patches').
            if entry[4] is not None or not (_adapter(entry[1], torch) or (
                    isinstance(entry[1], (tuple, torch.Tensor)) and _data(entry[1], torch, 0))):
                raise RemoteError(f"a replica's weight patch of {key[:120]} holds a {type(entry[1]).__name__}, not "
                                  "tensors and numbers or one of upstream's weight adapters over them: load the LoRA "
                                  f"with the host's {kind} (comfy.sd's load_lora_for_models) instead")
            # Upstream multiplies by the strengths and narrows the weight by the offset.
            if not (_number(entry[0]) and _number(entry[2]) and _offset(entry[3])):
                raise RemoteError(f"a replica's weight patch of {key[:120]} has strengths or offset that are not "
                                  "numbers (two numbers, and None or three integers)")
        checked[key] = [tuple(entry) for entry in entries]
    return checked


def _adapter(value, torch):
    """Whether `value` is one of upstream's weight adapters, as it crosses by value: of
    exactly one of the classes that do, its loaded keys names, its weights data."""
    cls = type(value)
    module, _ = ADAPTERS.get(cls.__qualname__, (None, None))
    return (cls.__module__ == module and isinstance(value.loaded_keys, set) and
            all(isinstance(name, str) for name in value.loaded_keys) and
            isinstance(value.weights, (tuple, list)) and _data(value.weights, torch, 0))


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
