"""Stand-in entries: another participant's model, as an entry of the host's own
comfy.model_management.current_loaded_models.

Upstream's eviction (free_memory, and through it unload_all_models, unload_model_and_clones
and load_models_gpu) reads members off every entry's patcher without asking. A StandIn is
that patcher for a model another process holds: its sizes come from the supervisor's ledger,
and partially_unload and detach go to the owner through the supervisor and return what the
owner measured freed. It holds no tensors, pins nothing and is never given device code:
is_dynamic() is False, so upstream's pin and cast-buffer code never reaches it, and loading
it does nothing.

STANDIN_SURFACE is the whole surface, one table: every member upstream reads off a ledger
entry's patcher on the non-dynamic path. Anything else raises AttributeError naming the
member, so a change of upstream's surface shows up as one clear error and is one line to
add here.
"""

import logging
import math
import uuid

from .. import participant as sv

log = logging.getLogger("comfy_supervisor")

# Member -> where upstream reads it (comfy/model_management.py unless named).
STANDIN_SURFACE = {
    "load_device": "LoadedModel.__init__, load_models_gpu",
    "parent": "LoadedModel._set_model",
    "model": "LoadedModel.model_load, log lines",
    "offload_device": "LoadedModel.model_unload",
    "model_size": "LoadedModel.model_memory, model_offloaded_memory",
    "loaded_size": "LoadedModel.model_loaded_memory, model_offloaded_memory, model_unload",
    "current_loaded_device": "LoadedModel.model_memory_required",
    "model_patches_to": "LoadedModel.model_load",
    "model_dtype": "LoadedModel.model_load",
    "partially_load": "LoadedModel.model_use_more_vram (model_load, use_more_memory)",
    "partially_unload": "LoadedModel.model_unload",
    "detach": "LoadedModel.model_unload, load_models_gpu (clones)",
    "model_patches_models": "load_models_gpu",
    "is_clone": "load_models_gpu",
    "is_dynamic": "free_memory, load_models_gpu",
    "clone_base_uuid": "unload_model_and_clones",
    "get_nested_additional_models": "unload_model_and_clones",
}


class StandInModule:
    """What upstream takes for the nn.Module (entry.model.model): weak-referenceable, with a
    class name for upstream's log lines, and an identity no real module shares."""

    __slots__ = ("__weakref__", "owner")

    def __init__(self, owner):
        self.owner = owner  # '"sdxl-vae" (model 3 of pack sdxl)' (label_of), for our own logs


class StandIn:
    """The patcher of one stand-in entry. Created and refreshed by StandIns only."""

    def __init__(self, entry, link, device, label, timeout_s):
        object.__setattr__(self, "_entry", entry)
        object.__setattr__(self, "_link", link)
        object.__setattr__(self, "_device", device)
        object.__setattr__(self, "_loaded", _loaded_of(entry))
        object.__setattr__(self, "_module", StandInModule(label))
        object.__setattr__(self, "_uuid", uuid.uuid4())
        object.__setattr__(self, "_label", label)
        object.__setattr__(self, "_timeout_s", timeout_s)

    def __getattr__(self, name):
        # Reached only for names not defined below: outside the surface upstream reads.
        raise AttributeError(f"comfy-supervisor stand-in for {self._label} has no member '{name}': "
                             "upstream read a member outside STANDIN_SURFACE (comfy_supervisor/host/standin.py); "
                             "add it there")

    def __setattr__(self, name, value):
        raise AttributeError(f"comfy-supervisor stand-in for {self._label}: '{name}' cannot be set")

    # ---- refreshed from the ledger ----

    def refresh(self, entry):
        object.__setattr__(self, "_entry", entry)
        object.__setattr__(self, "_loaded", _loaded_of(entry))

    @property
    def ledger_entry(self):
        return self._entry

    # ---- the surface (STANDIN_SURFACE) ----

    @property
    def load_device(self):
        return self._device

    @property
    def offload_device(self):
        return self._device  # where it goes is its owner's business; never ours

    parent = None  # no clone parent in this process

    @property
    def model(self):
        return self._module

    @property
    def clone_base_uuid(self):
        return self._uuid  # a clone family of its own: unload_model_and_clones keeps it

    def model_size(self):
        return self._entry.total_bytes

    def loaded_size(self):
        return self._loaded

    def current_loaded_device(self):
        return self._device

    def model_patches_to(self, device_or_dtype):
        pass  # no patches here: the owner holds them

    def model_dtype(self):
        return None

    def partially_load(self, device, extra_memory, force_patch_weights=False):
        return 0  # the host never loads another process's model

    def model_patches_models(self):
        return []

    def get_nested_additional_models(self):
        return []

    def is_clone(self, other):
        # Only itself: its weights live in another process, so nothing here shares them.
        # (Upstream's load_models_gpu finds an entry it loads again by is_clone, pops it and
        # re-inserts it at the front: a stand-in a node passed back in moves the same way.)
        return other is self

    def is_dynamic(self):
        return False  # keeps upstream's pin, cast-buffer and dynamic paths away

    def partially_unload(self, device, memory_to_free, *args, **kwargs):
        """Has the owner free `memory_to_free` bytes; returns the bytes it measured freed.
        Upstream passes a fraction (need * 1.1 less free): the owner is asked for the
        whole bytes above it, as the arbiter asks, since one byte short of it would have
        upstream's model_unload detach the whole model."""
        return self._unload(math.ceil(memory_to_free), detach=False)

    def detach(self, unpatch_all=True):
        """Has the owner unload the whole model. With unpatch_all False (upstream's clone
        eviction in load_models_gpu, which moves the entry and keeps the weights loaded)
        nothing is unloaded."""
        if unpatch_all:
            self._unload(0, detach=True)

    # ---- the round trip ----

    def _unload(self, nbytes, detach):
        # Never raises: upstream's loop calls this in the middle of its eviction, and an
        # exception there would leave current_loaded_models half-popped.
        try:
            result = self._link.unload_standin(self._entry, nbytes, detach=detach, timeout_s=self._timeout_s)
        except Exception as error:  # noqa: BLE001 (any failure is answered as nothing freed)
            log.warning("comfy-supervisor: unloading %s through the supervisor failed: %s", self._label, error)
            return 0
        before = self._loaded
        if result.outcome == sv.STANDIN_UNLOADED:
            if result.loaded_bytes != sv.UNKNOWN_BYTES:
                after = result.loaded_bytes
            else:
                after = 0 if detach else max(0, before - result.bytes_freed)
            object.__setattr__(self, "_loaded", min(after, self._entry.total_bytes))
            return result.bytes_freed
        if result.outcome == sv.STANDIN_OWNER_GONE:
            # Its memory went with its owner's process, or the model is gone already.
            object.__setattr__(self, "_loaded", 0)
            return before
        reason = {sv.STANDIN_DEFERRED: "its owner is busy and unloads it at its next boundary",
                  sv.STANDIN_TIMED_OUT: "its owner did not answer in time",
                  sv.STANDIN_REFUSED: "the supervisor refused it"}.get(result.outcome, "unknown outcome")
        log.info("comfy-supervisor: %s freed nothing now: %s", self._label, reason)
        return 0


def label_of(entry):
    """How our log lines name another process's model, as the supervisor's own lines do:
    '"sdxl-vae" (model 3 of pack sdxl)', the number always; the slot for an owner whose name
    the library could not read, and the number alone for a model registered with no name."""
    owner = f"pack {entry.owner_name}" if entry.owner_name else f"slot {entry.owner_slot}"
    number = f"model {entry.model_id} of {owner}"
    return f'"{entry.name}" ({number})' if entry.name else number


def _loaded_of(entry):
    return entry.total_bytes if entry.loaded_bytes == sv.UNKNOWN_BYTES else entry.loaded_bytes


class StandIns:
    """Keeps one LoadedModel around a StandIn in current_loaded_models for every model another
    participant holds on the supervised device, in step with the ledger. Called under the
    host's lock."""

    def __init__(self, mm, link, device, timeout_s=30.0):
        self.mm = mm          # comfy.model_management
        self.link = link      # sv.Participant
        self.device = device  # the supervised torch device: every stand-in's load_device
        self.timeout_s = timeout_s
        self.by_key = {}      # ledger key -> LoadedModel around the StandIn
        # The list holds patchers only weakly, as upstream's LoadedModel does: these are
        # the strong references that keep each StandIn alive while its model is loaded.
        self.patchers = {}    # ledger key -> StandIn
        self.withdrawn = False  # out of the list while a host load runs

    def is_standin(self, loaded):
        return isinstance(loaded.model, StandIn)

    def refresh(self, ledger, own_orders):
        """Brings the list in step with `ledger` (every participant's rows). `own_orders`:
        id(patcher) -> load order of the host's own entries, to place the stand-ins among
        them as the machine-wide load order has it."""
        if self.withdrawn:
            return  # a host load is running: the list is put back as it was after it
        others = {e.key: e for e in ledger if e.owner_slot != self.link.slot and e.device == 0}
        for key in set(self.by_key) - set(others):
            self._forget(key)
        for key, entry in others.items():
            loaded = self.by_key.get(key)
            if loaded is None:
                self.patchers[key], self.by_key[key] = self._make(entry)
            else:
                loaded.model.refresh(entry)
                loaded.currently_used = entry.currently_used
        self._place(own_orders)

    def _make(self, entry):
        label = label_of(entry)
        patcher = StandIn(entry, self.link, self.device, label, self.timeout_s)
        loaded = self.mm.LoadedModel(patcher)
        # As upstream's model_load leaves a loaded entry: a weak reference to the module and
        # a finalizer, which model_unload detaches. (model_load itself would also call
        # partially_load, which a stand-in answers with 0.)
        loaded.model_load()
        loaded.currently_used = entry.currently_used
        return patcher, loaded

    def _forget(self, key):
        self.patchers.pop(key)
        loaded = self.by_key.pop(key)
        if loaded.model_finalizer is not None:
            loaded.model_finalizer.detach()
        current = self.mm.current_loaded_models
        for i in range(len(current) - 1, -1, -1):
            if current[i] is loaded:
                current.pop(i)

    def _place(self, own_orders):
        """Merges the stand-ins into the list by load order (most recent first), leaving the
        host's own entries in their order. An entry upstream unloaded comes back while the
        ledger still shows it (its owner was busy, or did not answer)."""
        current = self.mm.current_loaded_models
        own = [loaded for loaded in current if not self.is_standin(loaded)]
        standins = sorted(self.by_key.values(), key=lambda loaded: -loaded.model.ledger_entry.load_order)
        merged = []
        newest = float("inf")
        for loaded in own:
            order = own_orders.get(id(loaded.model), newest)
            while standins and standins[0].model.ledger_entry.load_order > order:
                merged.append(standins.pop(0))
            merged.append(loaded)
        merged.extend(standins)
        for loaded in merged:
            if loaded.real_model is None and self.is_standin(loaded):
                loaded.model_load()  # unloaded by upstream, still loaded per the ledger
        if len(merged) != len(current) or any(a is not b for a, b in zip(merged, current)):
            current[:] = merged

    def withdraw(self):
        """Takes the stand-ins out of the list for a host load: the supervisor's admission
        already made room across the machine, so upstream's free_memory inside the load must
        not ask the other processes a second time."""
        current = self.mm.current_loaded_models
        self.withdrawn = True
        current[:] = [loaded for loaded in current if not self.is_standin(loaded)]

    def restore(self):
        self.withdrawn = False  # the next refresh puts them back, in order
