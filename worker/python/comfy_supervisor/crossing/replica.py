"""A host MODEL in a pack's worker: a replica, upstream's own objects built here over the
owner's weights (docs/PACKS.md, "Replicas").

A proxy answers what a list of uses allows; upstream's sampling code (CFGGuider.sample,
calc_cond_batch, hooks, wrappers) reads whatever it needs of a model, so a pack that runs
it on the host's MODEL needs the model itself. So a MODEL the host hands a pack arrives as
a ReplicaPatcher: a subclass of upstream's ModelPatcher over the host model's own
comfy.model_base class, both built here by upstream's constructors from a recipe of plain
values (replica_owner.recipe), and everything of upstream's runs on it unmodified.

- Its diffusion model is the owner's, mapped: a mirror (bridge/mirror.py) kept while the
  replicas over it live, not for one node call, and mapped again in place (the same module
  objects) at its next use after the owner revoked it (it evicted or reloaded the model),
  so that what the pack holds of it (a block it wrapped in an object patch) stays good.
- Loading it is the owner's: upstream's load_models_gpu in the worker first asks the owner
  to load its model (load_at_owners), with the weight patches the pack added applied
  there, through the owner's admission; the mirror read after that is of those weights.
  Upstream's own load path here (ReplicaPatcher.load) keeps its books and patches no
  weight. Its size here is 0: the weights count once, as the owner's.
- Its model_options are the host's, read as the proxy reads them: a change the pack makes
  in place during the node call is set back on the host's MODEL, as in one process.
  The host's functions in them are callbacks to the host. Its object patches are the
  host's objects (remote objects), set by upstream's patch_model as any.
- The replica the host handed over goes back to the host as the host's own MODEL. A clone
  of it, patched by the pack, is the pack's object: the host's sampler given it has the
  pack sample (crossing/forwarded.py), where its patches live.
- A model upstream's classes cannot rebuild here (a class of its own, custom operations, a
  partial load) crosses as a proxy, said once in the worker's log.
"""

import importlib
import logging
import sys
import threading
import weakref

from ..bridge.remote import RemoteError, link_of

log = logging.getLogger("comfy_supervisor")

# Where the classes a recipe names may come from: upstream's model and model configuration
# modules, imported by name here, never code the owner sent.
BASE_MODULES = ("comfy.model_base",)
CONFIG_MODULES = ("comfy.supported_models", "comfy.supported_models_base")
DIFFUSION_MODEL = "diffusion_model"


def replica_for(proxy):
    """The replica of the host's MODEL `proxy` stands for: one while the pack holds it, so
    that the same host object arrives as the same object, as in one process."""
    with _replicas_lock:
        found = _replicas.get(id(proxy))
    if found is None:
        try:
            found = _replicate(proxy)
        except Exception as error:  # noqa: BLE001 (a model upstream's classes cannot rebuild: the proxy serves)
            found = proxy
            _say_once(f"{link_of(proxy).describe()} is used as a proxy, not a replica: {str(error).splitlines()[0]}")
        with _replicas_lock:
            found = _replicas.setdefault(id(proxy), found)
    return found


_said = set()


def _say_once(line):
    """One line in the worker's log per reason a MODEL is not replicated."""
    if line not in _said:
        _said.add(line)
        log.warning("comfy-supervisor: %s", line[:400])


def _replicate(proxy):
    link = link_of(proxy)
    what = link.describe()
    recipe = link.invoke("replica", "model")
    if not isinstance(recipe, dict):
        raise RemoteError(f"{what}: the host's recipe of its replica is not an object")
    torch = importlib.import_module("torch")
    model_type = getattr(importlib.import_module("comfy.model_base").ModelType, str(recipe.get("model_type")), None)
    config_class = _upstream_class(recipe.get("config"), CONFIG_MODULES, what)
    base_class = _upstream_class(recipe.get("base"), BASE_MODULES, what)
    unet_config = recipe.get("unet_config")
    if model_type is None or not isinstance(unet_config, dict):
        raise RemoteError(f"{what}: the host's recipe of its replica is malformed (model_type, unet_config)")
    config = config_class(dict(unet_config))
    config.unet_config = dict(unet_config)  # the host's, whatever defaults the class adds
    config.manual_cast_dtype = _dtype_or_none(recipe.get("manual_cast_dtype"), torch, what)
    config.scaled_fp8 = _dtype_or_none(recipe.get("scaled_fp8"), torch, what)
    if isinstance(recipe.get("optimizations"), dict):
        config.optimizations = dict(recipe["optimizations"])
    try:
        # On the meta device: the layers upstream builds are shapes only, never memory.
        base = base_class(config, model_type=model_type, device=torch.device("meta"))
    except Exception as error:  # noqa: BLE001 (upstream's class refused the owner's configuration)
        raise RemoteError(f"{what}: {recipe.get('base')} cannot be built here from its owner's configuration: "
                          f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}") from None
    base.device = recipe.get("offload_device")
    weights = _Weights(proxy)
    base.diffusion_model = weights.module(base)
    object.__setattr__(base, "_sv_weights", weights)
    importlib.import_module("comfy.model_patcher")
    patcher = _patcher_class()(base, recipe.get("load_device"), recipe.get("offload_device"), 0,
                             weight_inplace_update=bool(recipe.get("weight_inplace_update")))
    patcher.model_options = proxy.model_options
    object_patches = recipe.get("object_patches")
    patcher.object_patches = dict(object_patches) if isinstance(object_patches, dict) else {}
    if recipe.get("hook_mode") is not None:
        patcher.hook_mode = recipe["hook_mode"]
    patcher._sv_origin = proxy
    return patcher


def origin_of(value):
    """The host's MODEL `value` is the replica of, as handed over (not a clone): it goes
    back as the host's own object; None for any other value."""
    return vars(value).get("_sv_origin") if isinstance(value, _patcher_class()) else None


def load_at_owners(models):
    """Before upstream's load_models_gpu in the worker: the owner of each replica among
    `models` loads its model, with the weight patches the pack added, through its own
    admission (whatever path upstream's load then takes here, which moves no weights)."""
    for model in models:
        if isinstance(model, _patcher_class()):
            vars(model.model)["_sv_weights"].load_at_owner(model)


def _upstream_class(path, modules, what):
    module_name, _, name = str(path or "").rpartition(".")
    if module_name not in modules:
        raise RemoteError(f"{what}: a replica of a {str(path)[:120]}, which is not a class of "
                          f"{', '.join(modules)}")
    found = getattr(importlib.import_module(module_name), name, None)
    if not isinstance(found, type):
        raise RemoteError(f"{what}: this worker's ComfyUI has no {str(path)[:120]} (another version than the "
                          "host's?)")
    return found


def _dtype_or_none(value, torch, what):
    if value is None or isinstance(value, torch.dtype):
        return value
    raise RemoteError(f"{what}: the host's recipe of its replica names a dtype that is not one")


class _Weights:
    """The owner's diffusion model as this process maps it: a mirror of the host model's,
    kept while the replicas over it live, mapped again in place once the owner revoked it."""

    def __init__(self, origin):
        self.origin = origin
        self.mirrors = link_of(origin).session.session.mirrors

    def module(self, holder):
        """The host model's diffusion model as upstream built it (replica_owner.mirror_of)."""
        return self.mirrors.kept_module(link_of(self.origin), DIFFUSION_MODEL, holder, use="replica_mirror")

    def load_at_owner(self, patcher):
        """The owner loads its model with `patcher`'s weight patches applied, through its own
        admission; a copy it made before and no longer theirs it revoked, so it is mapped again."""
        link_of(self.origin).invoke("load_replica", "weights", [patcher.patches])
        self.mirrors.refresh(link_of(self.origin), DIFFUSION_MODEL)


_patcher = []


def _patcher_class():
    """ReplicaPatcher, made once upstream's ModelPatcher is importable (a process without
    ComfyUI has no replicas, and nothing is one)."""
    if not _patcher:
        module = sys.modules.get("comfy.model_patcher")
        if module is None:
            return _Nothing
        _patcher.append(_make_patcher_class(module.ModelPatcher))
    return _patcher[0]


class _Nothing:
    """No value is an instance of this: the replica class before ComfyUI is imported."""


def _make_patcher_class(model_patcher):
    class ReplicaPatcher(model_patcher):
        """Upstream's ModelPatcher over a replica: everything upstream's, but the weights,
        which are the owner's to load."""

        def model_size(self):
            return 0  # the owner's weights, counted once as the owner's

        def load(self, device_to=None, lowvram_model_memory=0, force_patch_weights=False, full_load=False):
            """Upstream's load, but for the weights: the owner loaded them (load_at_owners)."""
            with self.use_ejected():
                if device_to is not None:
                    self.model.device = device_to
                self.model.model_lowvram = False
                self.model.model_loaded_weight_memory = 0
                self.model.current_weight_patches_uuid = self.patches_uuid
                extension = sys.modules.get("comfy.patcher_extension")  # a ComfyUI without it has no callbacks
                for callback in self.get_all_callbacks(extension.CallbacksMP.ON_LOAD) if extension else ():
                    callback(self, device_to, lowvram_model_memory, force_patch_weights, full_load)
                self.apply_hooks(self.forced_hooks, force_apply=True)

    ReplicaPatcher.__module__, ReplicaPatcher.__qualname__ = __name__, "ReplicaPatcher"
    return ReplicaPatcher


# id of the host's proxy -> its replica, while the pack holds it (the replica holds the proxy,
# so the id is not reused meanwhile).
_replicas = weakref.WeakValueDictionary()
_replicas_lock = threading.Lock()
