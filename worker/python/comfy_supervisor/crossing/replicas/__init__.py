"""A host model in a pack's worker: a replica, upstream's own objects built here over the
owner's weights (docs/PACKS.md, "Replicas").

A proxy answers what a list of uses allows; upstream's code (CFGGuider.sample,
calc_cond_batch, a CLIP's encode, a VAE's decode, hooks, wrappers) reads whatever it needs
of a model, so a pack that runs it on the host's needs the model itself. So a MODEL, CLIP,
VAE or CLIP_VISION the host hands a pack arrives as a replica: upstream's own object of
that type, built here by upstream's own code from a recipe of plain values (each kind's
module here: model, clip, vae, clip_vision; the host's side of all of them: owner), and
everything of upstream's runs on it unmodified.

- Its torch module is the owner's, mapped: a mirror (bridge/mirror.py) kept while the
  replicas over it live, not for one node call, and mapped again in place (the same module
  objects) at its next use after the owner revoked it (it evicted or reloaded the model),
  so that what the pack holds of it (a block it wrapped in an object patch) stays good.
- Loading it is the owner's: upstream's load_models_gpu in the worker first asks the owner
  to load its model (load_at_owners), with the weight patches the pack added applied
  there, through the owner's admission; the mirror read after that is of those weights.
  Upstream's own load path here (ReplicaPatcher.load) keeps its books and patches no
  weight. Its size here is 0: the weights count once, as the owner's.
- The replica the host handed over goes back to the host as the host's own object. A clone
  of it, patched by the pack, is the pack's object: the host given it has the pack run it
  (crossing/forwarded.py), where its patches live.
- A model upstream's classes cannot rebuild here (a class of its own, custom operations, a
  partial load) crosses as a proxy, said once in the worker's log.
"""

import logging
import threading
import weakref

from ...bridge.remote import RemoteError, link_of
from . import clip, clip_vision, model, vae
from .building import Weights, patcher_class, weights_under

log = logging.getLogger("comfy_supervisor")

# A kind's name -> its module: WEIGHTS (the attribute of its torch module), recipe(obj),
# weights_of(obj), mirror_of(obj, grants), patcher_of(obj) and, where it needs one,
# remember_builds() at the owner, and build(proxy, recipe, weights) here. A kind not in it
# crosses as a proxy.
REPLICATED = {"MODEL": model, "CLIP": clip, "VAE": vae, "CLIP_VISION": clip_vision}


def install_at_owner():
    """In a process whose models packs replicate (the host): each kind whose recipe needs
    what upstream built its objects from, which upstream does not keep, remembers it as
    they are built (its module's remember_builds)."""
    for kind in REPLICATED.values():
        if hasattr(kind, "remember_builds"):
            kind.remember_builds()


def replica_for(proxy):
    """The replica of the host's object `proxy` stands for, or `proxy` itself where its kind
    is not replicated: one while the pack holds it, so that the same host object arrives as
    the same object, as in one process."""
    link = link_of(proxy)
    kind = REPLICATED.get(link.kind.name) if link is not None else None
    if kind is None:
        return proxy
    with _replicas_lock:
        found = _replicas.get(id(proxy))
    if found is None:
        try:
            found = _replicate(proxy, kind, link)
        except Exception as error:  # noqa: BLE001 (a model upstream's classes cannot rebuild: the proxy serves)
            found = proxy
            _say_once(f"{link.describe()} is used as a proxy, not a replica: {str(error).splitlines()[0]}")
        with _replicas_lock:
            found = _replicas.setdefault(id(proxy), found)
    return found


def _replicate(proxy, kind, link):
    recipe = link.invoke("replica", "recipe")
    if not isinstance(recipe, dict):
        raise RemoteError(f"{link.describe()}: the host's recipe of its replica is not an object")
    replica = kind.build(proxy, recipe, Weights(proxy, kind.WEIGHTS))
    _origins[id(replica)] = (weakref.ref(replica, lambda _, key=id(replica): _origins.pop(key, None)), proxy)
    return replica


_said = set()


def _say_once(line):
    """One line in the worker's log per reason a model is not replicated."""
    if line not in _said:
        _said.add(line)
        log.warning("comfy-supervisor: %s", line[:400])


def origin_of(value):
    """The host's object `value` is the replica of, as handed over (not a clone): it goes
    back as the host's own object; None for any other value."""
    found = _origins.get(id(value))
    return found[1] if found is not None and found[0]() is value else None


def load_at_owners(models):
    """Before upstream's load_models_gpu in the worker: the owner of each replica among
    `models` loads its model, with the weight patches the pack added, through its own
    admission (whatever path upstream's load then takes here, which moves no weights)."""
    for patcher in models:
        weights = weights_under.get(patcher.model) if isinstance(patcher, patcher_class()) else None
        if weights is not None:
            weights.load_at_owner(patcher)


# id of the host's proxy -> its replica, while the pack holds it (the replica holds the proxy,
# so the id is not reused meanwhile).
_replicas = weakref.WeakValueDictionary()
_replicas_lock = threading.Lock()
_origins = {}  # id of a replica as handed over -> (a weak reference to it, the host's proxy it stands for)
