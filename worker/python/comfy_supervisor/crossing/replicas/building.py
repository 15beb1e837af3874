"""What every replica is built with: upstream's ModelPatcher made a replica's (its weights
the owner's to load), the owner's module mapped and kept (Weights), and upstream's classes
looked up by name only in upstream's own modules."""

import importlib
import sys
import weakref

from ...bridge.remote import RemoteError, link_of


class Weights:
    """The owner's torch module of a replica as this process maps it: a mirror of it, kept
    while the replicas over it live, mapped again in place once the owner revoked it."""

    def __init__(self, origin, name):
        self.origin, self.name = origin, name  # name: the module's attribute at its owner, for errors
        self.mirrors = link_of(origin).session.session.mirrors

    def module(self, holder, built=None):
        """The owner's module, as upstream built it (its kind's mirror_of), kept while
        `holder` lives: built here from its recipe, or `built` (upstream's module built here
        on the meta device) with its tensors set over the owner's."""
        return self.mirrors.kept_module(link_of(self.origin), self.name, holder, use="replica_mirror", built=built)

    def built_module(self, holder, built):
        """`built` (upstream's module built here on the meta device) over the owner's
        tensors, kept while `holder` lives, and loaded through this owner when a replica's
        patcher over it loads. The module lives on in a cycle with its mirror's hooks until
        the collector runs, so the owner's object this loads through (held here) is let go
        of with `holder`, not with the module."""
        module = self.module(holder, built=built)
        self.under(module)
        weakref.finalize(holder, weights_under.pop, module, None)
        return module

    def under(self, patched):
        """`patched` (what a replica's ModelPatcher patches) loads through this owner."""
        weights_under[patched] = self

    def load_at_owner(self, patcher):
        """The owner loads its model with `patcher`'s weight patches applied, through its own
        admission; a copy it made before and no longer theirs it revoked, so it is mapped again."""
        link_of(self.origin).invoke("load_replica", "weights", [patcher.patches])
        self.mirrors.refresh(link_of(self.origin), self.name)


def whole(model, what):
    """Refuses, in one line, a model upstream loaded in part (lowvram): a replica maps a
    whole model, on one device."""
    if getattr(model, "model_lowvram", False):
        raise RemoteError(f"{what} is loaded in part (lowvram): a replica maps a whole model; give ComfyUI more "
                          "memory or run the pack's node in ComfyUI's process")


def upstream_class(path, modules, what):
    """The class `path` ("module.Class") names, looked up only in upstream's `modules`."""
    module_name, _, name = str(path or "").rpartition(".")
    if module_name not in modules:
        raise RemoteError(f"{what}: a replica of a {str(path)[:120]}, which is not a class of "
                          f"{', '.join(modules)}")
    found = getattr(importlib.import_module(module_name), name, None)
    if not isinstance(found, type):
        raise RemoteError(f"{what}: this worker's ComfyUI has no {str(path)[:120]} (another version than the "
                          "host's?)")
    return found


def dtype_or_none(value, what):
    torch = sys.modules["torch"]
    if value is None or isinstance(value, torch.dtype):
        return value
    raise RemoteError(f"{what}: the host's recipe of its replica names a dtype that is not one")


_patcher = []


def patcher_class():
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



weights_under = weakref.WeakKeyDictionary()  # what a replica's patcher patches -> its Weights
