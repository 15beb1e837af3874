"""ComfyUI as the host participant of comfy-supervisor (slot 0).

install() is called by the custom node in worker/python/comfyui_custom_node when the
supervisor started this ComfyUI (COMFY_SV_SLOT set). It then:

- wraps comfy.model_management.load_models_gpu: before upstream loads, it asks the
  supervisor to admit what the load needs on the supervised device, sized as upstream's
  load_models_gpu sizes it (each model's load_device, its model_patches_models included;
  the bytes not on that device yet), keeping the load's own models, and publishes the
  granted reserve into upstream's EXTRA_RESERVED_VRAM. The supervisor's admission has then
  made room across the machine, so upstream's own free_memory inside this load sees the
  host's models only: the stand-ins are out of the list while it runs (docs/ARBITRATION.md);
- wraps comfy.model_management.free_memory, through which every other unload path of
  upstream's runs (unload_all_models for POST /free and "Unload models",
  unload_model_and_clones, a custom node's own call), over the host's own entries plus
  one stand-in entry per model another participant holds on the device (standin.py), so
  upstream's own loop reaches every process's models. While it runs the command thread
  leaves the list alone (evictions asked meanwhile wait for its end), but it holds no lock
  the command thread needs: a stand-in waits for another process's answer;
- keeps the ledger true, each model under its name (model_names.py: its class and file):
  every command-thread period (REFRESH_S, up to IDLE_REFRESH_S
  while idle) and after each of the above, the entries of current_loaded_models on the
  supervised device are registered, their residency reported, the ones gone dropped,
  whatever removed them (upstream's free_memory from any caller, cleanup_models from a
  finalizer, main.py's post-prompt unload, a partial unload); entries on another device
  (a text encoder kept on the CPU) never enter it. The stand-ins are brought in step with
  the ledger at the same times;
- answers the supervisor's commands from a background thread: partial_unload(n) runs the
  matching LoadedModel's model_unload(memory_to_free=n), detach runs model_unload(), each
  answered with the bytes measured freed; full_release, cast_epoch_boundary,
  partial_release and release_node_boundary run soft_empty_cache() and
  reset_cast_buffers() where present; release_pins runs free_pins(n) where present;
  Shutdown ends the process as SIGTERM would. An exception from upstream in one command is
  answered as nothing freed, logged once per kind, and the thread goes on;
- wraps execution.PromptExecutor.execute: a whole prompt is one busy stretch (ComfyUI has
  no clean per-node hook); evictions that arrive meanwhile run at its end, except while
  the prompt thread waits for an admission or on a pack's node call (waiting_outside_upstream);
- wraps execution.execute, upstream's step of a prompt that runs one node: the uses of
  packs' objects a node makes are one busy stretch of each pack's worker, ended at the
  node's end (bridges.Bridges.node_running);
- starts the bridges to the packs that run in workers of their own (bridges.py): the
  custom node registers their proxy nodes.

The supervised device is the one torch device whose memory the supervisor arbitrates:
cuda:N when it supervises CUDA device N (COMFY_SV_CUDA_DEVICE), else ComfyUI's own torch
device. With the simulated device and ComfyUI on the CPU (--cpu), the host's loaded bytes
are charged on the simulated device, so the other participants see them.

Wraps replace module and class attributes: code that imported a function by name before
install() keeps upstream's and bypasses them.

RUN AGAINST A REAL ComfyUI: scripts/comfyui-check runs this integration in a real
ComfyUI (a125cd84, --cpu, torch 1.13 from Debian; README "Checking against a real
ComfyUI"): a prompt's load admitted and in the ledger, a worker's load evicting it through
upstream's model_unload, POST /free reaching a worker's model through its stand-in, and
every step since (`scripts/comfyui-check --help` lists them). The tests run the same code against tests/host/fake_comfyui, our own model of upstream's
memory manager.
"""

import contextlib
import inspect
import logging
import os
import signal
import threading
import time

from .. import participant as sv
from ..bridge import mirror
from ..crossing import forwarded, guided, mirror_recipes, replicas
from ..crossing.functions import load_by_owners
from . import model_names
from .bridges import Bridges
from .standin import StandIn, StandIns

log = logging.getLogger("comfy_supervisor")

REFRESH_S = 0.5  # the command-thread period while anything happens: how stale the ledger may get
# While nothing happens (no prompt or node call, no command, no change of ours or of the
# ledger), the period doubles up to this: an idle process wakes every 2 s, not twice a
# second (docs/BENCHMARKS.md, "idle"), and anything that happens brings it back. So a
# model that left current_loaded_models by no hook of ours (a finalizer's cleanup_models)
# leaves the ledger within this of an idle stretch; an eviction asked of it meanwhile
# finds it gone and says so.
IDLE_REFRESH_S = 2.0


def supervised_device(mm):
    """The torch device whose memory the supervisor arbitrates."""
    cuda_index = os.environ.get("COMFY_SV_CUDA_DEVICE")
    if cuda_index:
        import torch
        return torch.device("cuda", int(cuda_index))
    return mm.get_torch_device()


def _device_key(device):
    """A device as (type, index), so that cuda and cuda:0 compare equal."""
    if device is None:
        return None
    return (getattr(device, "type", str(device)), getattr(device, "index", None) or 0)


class _Host:
    def __init__(self, mm, link, with_standins=True):
        self.mm = mm      # comfy.model_management
        self.link = link  # sv.Participant
        # Stand-ins live in the ComfyUI host alone: a pack's worker evicts only its own.
        self.with_standins = with_standins
        self.process = "ComfyUI" if with_standins else "this pack's worker"  # for the log lines
        # Upstream's current_loaded_models is touched by the prompt thread and ours.
        self.lock = threading.RLock()
        # Held by whoever runs upstream's own loop over that list (free_memory,
        # load_models_gpu), always taken before self.lock. free_memory may wait on another
        # process (a stand-in's owner): it waits holding this one only, so the command
        # thread goes on answering, and keeps its hands off the list while `in_upstream`.
        self.upstream_lock = threading.RLock()
        self.in_upstream = 0
        self.device = supervised_device(mm)
        self.device_key = _device_key(self.device)
        import torch  # ComfyUI's own dependency, loaded already
        # Allocator figures exist for a CUDA device that torch can use.
        self.torch_cuda = torch.cuda if self.device_key[0] == "cuda" and torch.cuda.is_available() else None
        # The simulated device stands for ComfyUI's RAM under --cpu: charge it ourselves.
        self.charges_device = not os.environ.get("COMFY_SV_CUDA_DEVICE") and self.device_key[0] == "cpu"
        self.charged = 0
        self.standins = StandIns(mm, link, self.device)
        self.ids = {}         # id(ModelPatcher) -> ledger model id
        self.reported = {}    # ledger model id -> (loaded bytes, currently used) last sent
        self.next_id = 1
        self.busy = False
        # The prompt thread waits in our code (for an admission, or on a pack's node
        # call), not in upstream's: evictions run at once, even in a busy stretch.
        self.waiting = 0
        self.deferred = []    # commands that arrived during a prompt, or while freeing
        self.epoch = 0
        self.failures_logged = set()
        self.last_refresh = 0.0
        self.period = REFRESH_S  # the command thread's, now (serve)
        self.happened = False    # something happened since the last period's end (serve)
        self.ledger_seen = None  # the ledger's generation at the last refresh of the stand-ins
        self.census = None       # the census last published
        self.bridges = None   # bridges.Bridges, in the host when packs run in workers
        # A pack's worker: "node" or "callback" once node_started (or callback_started) was
        # sent, None again at node_finished.
        self.announced = None
        self.busy_stretches = 0  # begun so far, each with node_started or callback_started (the host's stats)
        self.node_ok = True

    def on_device(self, loaded):
        return _device_key(loaded.device) == self.device_key

    # ---- the ledger ----

    def model_id(self, patcher):
        key = id(patcher)
        if key not in self.ids:
            self.ids[key] = self.next_id
            self.next_id += 1
        return self.ids[key]

    def sync_ledger(self, used=()):
        """Reports the host's own entries on the supervised device to the ledger: new ones,
        changed residency, the gone. `used`: id()s of the patchers a load just used, which
        move to the front of the order (upstream re-inserts them at index 0). Not while
        upstream's free_memory walks the list: it syncs at its end."""
        with self.lock:
            if self.in_upstream:
                return
            present = set()
            for loaded in self.own_on_device():
                patcher = loaded.model
                model_id = self.model_id(patcher)
                present.add(model_id)
                figures = (loaded.model_loaded_memory(), bool(loaded.currently_used))
                if model_id not in self.reported:
                    dynamic = bool(getattr(patcher, "is_dynamic", lambda: False)())
                    self.link.register_model(model_id, loaded.model_memory(), figures[0], dynamic=dynamic,
                                             name=model_names.name_of(patcher))
                just_used = id(patcher) in used
                if self.reported.get(model_id) != figures or just_used:
                    self.happened = True
                    # One reference, as the workers report: upstream's sys.getrefcount
                    # counts this process's internals, which mean nothing across processes.
                    self.link.report_residency(model_id, figures[0], references=1, currently_used=figures[1],
                                               just_used=just_used)
                    self.reported[model_id] = figures
            for model_id in set(self.reported) - present:
                self.happened = True
                self.link.drop_model(model_id)
                del self.reported[model_id]
                self.ids = {key: value for key, value in self.ids.items() if value != model_id}
            self.recharge()

    def own_on_device(self):
        """The host's own entries on the supervised device (stand-ins are not its own)."""
        return [loaded for loaded in list(self.mm.current_loaded_models)
                if loaded.model is not None and not self.standins.is_standin(loaded) and self.on_device(loaded)]

    def recharge(self):
        """Holds on the simulated device what the host's models hold in RAM (under --cpu),
        so the other participants see it; before an unload receipt, so that the supervisor
        reads the bytes freed when it reads the receipt."""
        if not self.charges_device:
            return
        loaded_bytes = sum(loaded.model_loaded_memory() for loaded in self.own_on_device())
        if loaded_bytes > self.charged:
            if not self.link.device_allocate(loaded_bytes - self.charged):
                self.log_once("charge", "comfy-supervisor: the simulated device has no room for the host's "
                                        f"{loaded_bytes} loaded bytes; the increase is not counted on it")
                return
        elif loaded_bytes < self.charged:
            self.link.device_release(self.charged - loaded_bytes)
        self.charged = loaded_bytes

    def refresh(self, used=()):
        """The ledger from current_loaded_models (`used` as for sync_ledger), then the
        stand-ins from the ledger. A pack's worker keeps no stand-ins, so it does not read
        the ledger at all: with a million rows, walking them every period was most of an
        idle worker's CPU."""
        with self.lock:
            self.last_refresh = time.monotonic()
            if self.in_upstream:
                return  # upstream's free_memory walks the list, and refreshes at its end
            self.sync_ledger(used)
            if self.with_standins:
                generation = self.link.ledger_generation()
                self.happened |= generation != self.ledger_seen
                self.ledger_seen = generation
                ledger = self.link.read_ledger()
                own = {entry.model_id: entry.load_order for entry in ledger if entry.owner_slot == self.link.slot}
                own_orders = {key: own[model_id] for key, model_id in self.ids.items() if model_id in own}
                self.standins.refresh(ledger, own_orders)

    def loaded_entry(self, model_id):
        for loaded in self.mm.current_loaded_models:
            if loaded.model is not None and not self.standins.is_standin(loaded) and \
                    self.ids.get(id(loaded.model)) == model_id:
                return loaded
        return None

    # ---- loading: admission first ----

    def load_need(self, models):
        """What upstream's load_models_gpu loads onto the supervised device: the models and
        their model_patches_models(), each its bytes not on its load_device yet."""
        unique = {}
        for patcher in models:
            unique[id(patcher)] = patcher
            for extra in getattr(patcher, "model_patches_models", lambda: [])():
                unique[id(extra)] = extra
        needed = 0
        for patcher in unique.values():
            # A stand-in a node passed back in (upstream's loaded_models() lists them) is
            # another process's model: nothing of it loads here.
            if isinstance(patcher, StandIn) or _device_key(patcher.load_device) != self.device_key:
                continue
            if _device_key(patcher.current_loaded_device()) == self.device_key:
                needed += patcher.model_size() - patcher.loaded_size()
            else:
                needed += patcher.model_size()
        return needed, [self.ids[key] for key in unique if key in self.ids]

    def load_models_gpu(self, original, models, *args, **kwargs):
        memory_required = kwargs.get("memory_required", args[0] if args else 0)
        with self.lock:
            needed, keep = self.load_need(models)
        if needed > 0:
            # Not under the lock: while we wait, the supervisor may ask our thread to evict
            # our own other models, candidates as in upstream's one list.
            with self.waiting_outside_upstream():
                answer = self.link.request_admission(needed, largest_tensor=int(memory_required), streams=1,
                                                     keep_loaded=keep)
            if not answer.granted:
                raise RuntimeError(answer.refusal())
            if answer.shortfall:
                log.warning("comfy-supervisor admitted this load %d bytes short (policy admit)", answer.shortfall)
            self.mm.EXTRA_RESERVED_VRAM = answer.reserve_bytes
        with self.upstream_lock, self.lock:
            self.standins.withdraw()
            self.in_upstream += 1
            try:
                return original(models, *args, **kwargs)
            finally:
                self.in_upstream -= 1
                self.standins.restore()
                self.refresh(used={id(m) for m in models})

    def waiting_outside_upstream(self):
        """The prompt thread waits in our code, holding no model of ours in use: the
        command thread may evict at once (a pack's node may be waiting for that room)."""
        return _WaitingOutsideUpstream(self)

    def free_memory(self, original, *args, **kwargs):
        with self.upstream_lock:
            with self.lock:
                self.refresh()  # upstream's loop sees the ledger as it stands now
                self.in_upstream += 1
            try:
                # Not under self.lock: a stand-in's unload waits for its owner's answer.
                return original(*args, **kwargs)
            finally:
                with self.lock:
                    self.in_upstream -= 1
                    self.sync_ledger()  # nothing while a load that called this goes on
                    if not self.in_upstream and self.answer_deferred():
                        self.sync_ledger()

    # ---- commands ----

    def serve(self):
        try:
            while True:
                # Waits for a command no longer than the next refresh is due.
                command = self.link.next_command(max(0.0, self.last_refresh + self.period - time.monotonic()))
                if command is not None and command.type == sv.SHUTDOWN:
                    log.info("comfy-supervisor asked %s to finish; ending the process", self.process)
                    os.kill(os.getpid(), signal.SIGTERM)
                    return
                if command is not None:
                    with self.lock:
                        self.happened = True
                        if self.defers(command):
                            self.deferred.append(command)
                        else:
                            self.answer(command)
                if time.monotonic() - self.last_refresh >= self.period:
                    self.attempt("refresh", self.refresh)
                    self.attempt("census", self.publish_census)
                    if self.bridges is not None:
                        self.attempt("bridges", self.bridges.drain_idle)
                    with self.lock:
                        idle = not (self.happened or self.busy)
                        self.period = min(2 * self.period, IDLE_REFRESH_S) if idle else REFRESH_S
                        self.happened = False
        except sv.ParticipantError as error:
            log.error("comfy-supervisor: %s; ending %s so the supervisor restarts it", error, self.process)
            os.kill(os.getpid(), signal.SIGTERM)

    def attempt(self, what, call):
        """call()'s value, or None when upstream raised: logged once per kind, and the
        thread goes on. The link's own failures (ParticipantError) end the thread above."""
        try:
            return call()
        except sv.ParticipantError:
            raise
        except Exception as error:  # noqa: BLE001 (upstream may raise anything)
            self.log_once((what, type(error).__name__, str(error)),
                          f"comfy-supervisor: {what} failed: {type(error).__name__}: {error}; "
                          "answered as nothing freed, and the thread goes on")
            return None

    def log_once(self, key, line):
        if key not in self.failures_logged:
            self.failures_logged.add(key)
            log.error(line)

    def answer(self, command):
        if command.type in (sv.PARTIAL_UNLOAD, sv.DETACH):
            result = self.attempt("an eviction", lambda: self.unload(command))
            if result is None:
                # Nothing counts as freed; what stays loaded is not known until the next
                # refresh reports it (unknown counts as all loaded, never as zero).
                if command.model_id in self.reported:
                    self.reported[command.model_id] = None
                result = (0, command.bytes, sv.UNKNOWN_BYTES)
            freed, asked, after = result
            self.attempt("refresh", self.recharge)
            self.link.send_unload_receipt(command, freed, after, bytes_requested=asked)
            self.attempt("refresh", self.sync_ledger)
        elif command.type == sv.RELEASE_PINS:
            free_pins = getattr(self.mm, "free_pins", None)
            freed = self.attempt("release_pins", lambda: int(free_pins(command.bytes))) if free_pins else 0
            self.link.send_release_receipt(command, freed or 0)
        elif command.type in sv.RELEASES:
            self.link.send_release_receipt(command, self.attempt("a release", self.release_caches) or 0)

    def unload(self, command):
        loaded = self.loaded_entry(command.model_id)
        if loaded is None:
            return 0, command.bytes, 0
        before = loaded.model_loaded_memory()
        asked = command.bytes if command.type == sv.PARTIAL_UNLOAD else before
        if command.type == sv.PARTIAL_UNLOAD:
            detached = loaded.model_unload(memory_to_free=command.bytes)
        else:
            detached = loaded.model_unload()
        if detached and loaded in self.mm.current_loaded_models:
            # As upstream's free_memory: a detached model leaves current_loaded_models, unless
            # upstream's cleanup_models, run by the model's finalizer when the unload let go of
            # its last reference, took it already.
            self.mm.current_loaded_models.remove(loaded)
        after = 0 if detached else loaded.model_loaded_memory()
        # The freed blocks go back to the driver, where the other processes see them.
        self.mm.soft_empty_cache()
        return max(0, before - after), asked, after

    def release_caches(self):
        """Returns cached blocks and cast buffers; the bytes torch's reserve went down by."""
        before = self.allocator_reserved()
        reset = getattr(self.mm, "reset_cast_buffers", None)
        if reset:
            reset()
        self.mm.soft_empty_cache()
        return max(0, before - self.allocator_reserved())

    def allocator_reserved(self):
        return self.torch_cuda.memory_reserved(self.device) if self.torch_cuda else 0

    def publish_census(self):
        """The census, when it changed since it was published last (the library's own
        thread keeps the heartbeat)."""
        cuda = self.torch_cuda
        census = dict(
            pinned_bytes=max(0, int(getattr(self.mm, "TOTAL_PINNED_MEMORY", 0))),
            pinned_ceiling=max(0, int(getattr(self.mm, "MAX_PINNED_MEMORY", 0))),
            allocator_reserved=cuda.memory_reserved(self.device) if cuda else 0,
            allocator_active=cuda.memory_allocated(self.device) if cuda else 0,
            resident_set_bytes=self.resident_set_bytes(),
            prompt_epoch=self.epoch)
        if census != self.census:
            self.link.update_census(**census)
            self.census = census

    @staticmethod
    def resident_set_bytes():
        """Ours: the pages of another process's model we map as a mirror are its (bridge/mirror.py)."""
        return max(0, sv.resident_set_bytes() - mirror.mapped_bytes())

    # ---- busy: a prompt in the host, node calls in a worker ----

    @contextlib.contextmanager
    def busy_stretch(self, succeeded=lambda: True):
        """A prompt in the host: busy from start to end, to the supervisor (node_started,
        node_finished) and to the command thread, which defers evictions and releases that
        arrive meanwhile to the end (docs/PACKS.md says which run at once)."""
        with self.lock:
            self.epoch += 1
            epoch = self.epoch
            self.busy = self.happened = True
        self.link.node_started(epoch)
        try:
            yield
        finally:
            self.link.node_finished(epoch, ok=succeeded())
            with self.lock:
                self.end_busy()
                self.attempt("refresh", self.refresh)

    def node_call(self, epoch):
        """One node call in a pack's worker, for prompt `epoch`: busy to the command thread
        while it runs. Busy to the supervisor from the first call of a run of them until
        idle() (the node server calls it once no call came for a moment), so that calls
        back to back cost no messages. After each node its caches are released here, as
        the supervisor's release_node_boundary would have them released."""
        return _NodeCall(self, epoch)

    def node_call_starts(self, epoch, callback=False):
        activity = "callback" if callback else "node"
        with self.lock:
            self.busy = self.happened = True
            self.epoch = epoch
            # Said again where a stretch goes on as the other (the host calls a function
            # its node just returned): what comfyctl shows is what runs now.
            announce = self.announced != activity
            self.busy_stretches += self.announced is None
            self.announced = activity
        if announce:
            if callback:
                self.link.callback_started(epoch)
            else:
                self.link.node_started(epoch)

    def serving_peer(self):
        """The host uses this worker's objects (each step of its sampler with the pack's
        model, its control net, a patch of the pack's called back): busy as during a node
        call, from the first use of a run of them until idle(), which the node server calls
        at the end of the host's node that made them (uses_done), or once no message came
        for IDLE_AFTER_S where no node of the host's made them. The command thread defers
        evictions while busy, so a model of this worker is never evicted under a use, nor
        between two uses of one host node (a sampler's steps); and each use after the
        first costs this test, not a lock and a context.
        A use within a node call is busy already, and the node's end releases its caches.
        To the supervisor, a stretch a use began is a callback (comfyctl shows one that
        lasts, as a pack's function that does not return)."""
        if not self.busy:
            self.node_call_starts(self.epoch, callback=True)

    def node_call_ends(self, ok):
        self.node_ok = ok
        with self.lock:
            answered = self.end_busy()
            self.attempt("release_node_boundary", self.release_caches)
            if answered:
                self.attempt("refresh", self.refresh)

    def defers(self, command):
        """Whether the command thread keeps `command` for later. Under the lock."""
        evicts = command.type in (sv.PARTIAL_UNLOAD, sv.DETACH)
        if evicts and self.in_upstream:
            return True  # upstream's own loop is walking the list
        return self.busy and not (self.waiting and evicts)

    def answer_deferred(self):
        """Answers, in order, the deferred commands that need wait no longer; whether there
        were any. Under the lock."""
        due, kept = [], []
        for command in self.deferred:
            (kept if self.defers(command) else due).append(command)
        self.deferred = kept
        for command in due:
            self.answer(command)
        return bool(due)

    def end_busy(self):
        """Not busy any more: answers the commands deferred meanwhile; whether there were any.
        Under the lock."""
        self.busy = False
        return self.answer_deferred()

    def idle(self):
        """The run of node calls or uses ended: the supervisor may count this worker idle,
        and the commands deferred meanwhile are answered."""
        with self.lock:
            announced, self.announced = self.announced, None
            if self.busy and self.end_busy():
                self.attempt("refresh", self.refresh)
        if announced:
            self.link.node_finished(self.epoch, ok=self.node_ok)

    def execute(self, original, executor, *args, **kwargs):
        with self.busy_stretch(succeeded=lambda: bool(getattr(executor, "success", True))):
            return original(executor, *args, **kwargs)


class _WaitingOutsideUpstream:
    """_Host.waiting_outside_upstream(); a class, as it is on every node call's path."""

    def __init__(self, host):
        self.host = host

    def __enter__(self):
        with self.host.lock:
            self.host.waiting += 1

    def __exit__(self, *exc):
        with self.host.lock:
            self.host.waiting -= 1


class _NodeCall:
    """_Host.node_call(); a class, as it is on every node call's path."""

    def __init__(self, host, epoch):
        self.host, self.epoch = host, epoch

    def __enter__(self):
        self.host.node_call_starts(self.epoch)

    def __exit__(self, kind, value, traceback):
        self.host.node_call_ends(ok=kind is None)


def _integrate(mm, link, with_standins):
    """Wraps this process's comfy.model_management for the supervisor and starts the
    command thread; returns the integration."""
    host = _Host(mm, link, with_standins=with_standins)
    original_load = mm.load_models_gpu
    original_free = mm.free_memory

    def load_models_gpu(models, *args, **kwargs):
        # Another process's model (a remote object) is loaded by its owner, as its own load,
        # and so are a replica's weights.
        ours = load_by_owners(models, args, kwargs)
        replicas.load_at_owners(ours)
        if len(ours) < len(models) and not ours:
            return None
        return host.load_models_gpu(original_load, ours, *args, **kwargs)

    def free_memory(*args, **kwargs):
        return host.free_memory(original_free, *args, **kwargs)

    original_unload = mm.LoadedModel.model_unload

    def model_unload(loaded, *args, **kwargs):
        # Its mirrors in other processes go first, and none is granted until it is unloaded
        # (bridge/mirror.py: a CUDA one's reader lets go before upstream frees the memory).
        with mirror.unloading(loaded.model):
            return original_unload(loaded, *args, **kwargs)

    mm.load_models_gpu = load_models_gpu
    mm.free_memory = free_memory
    mm.LoadedModel.model_unload = model_unload
    model_names.install()  # each model's name in the ledger: its class and file
    threading.Thread(target=host.serve, name="comfy-supervisor", daemon=True).start()
    return host


def _remember_clip_vision_configs():
    """Each CLIP vision model upstream builds remembers the configuration it was built from:
    the recipe of its mirror in a pack's worker (crossing/mirror_recipes.py)."""
    try:
        import comfy.clip_vision as clip_vision
    except ImportError:
        return  # a ComfyUI without CLIP vision models has none to mirror
    original = clip_vision.ClipVisionModel.__init__

    def __init__(model, json_config, *args, **kwargs):
        original(model, json_config, *args, **kwargs)
        mirror_recipes.remember_clip_vision_config(model, json_config)

    clip_vision.ClipVisionModel.__init__ = __init__


def install():
    """Makes this ComfyUI process the supervisor's host participant; None when ComfyUI was
    not started by the supervisor. Raises sv.ParticipantError with one line on failure."""
    if not os.environ.get("COMFY_SV_SLOT"):
        return None
    import comfy.model_management as mm
    import execution

    link = sv.Participant(capabilities=sv.CAP_PARTIAL_UNLOAD | sv.CAP_PINNED_MEMORY)
    host = _integrate(mm, link, with_standins=True)

    original_execute = execution.PromptExecutor.execute

    def execute(executor, *args, **kwargs):
        return host.execute(original_execute, executor, *args, **kwargs)

    execution.PromptExecutor.execute = execute
    _remember_clip_vision_configs()  # the host's, which a pack's worker mirrors
    replicas.install_at_owner()  # what upstream built the host's models from, for their replicas
    forwarded.install()  # a pack's MODEL samples in its pack, where its patches live
    guided.install()  # and so does upstream's guider over it
    host.bridges = Bridges.start(host)
    original_node = getattr(execution, "execute", None)
    # Upstream's per-node step, a coroutine function since the executor went asynchronous;
    # where it is not, uses are not held and each run of them ends after IDLE_AFTER_S.
    if host.bridges is not None and inspect.iscoroutinefunction(original_node):
        async def execute_node(*args, **kwargs):
            with host.bridges.node_running():
                return await original_node(*args, **kwargs)

        execution.execute = execute_node
    log.info("comfy-supervisor: this ComfyUI is the host participant (slot %d, generation %d), supervising %s",
             link.slot, link.generation, host.device)
    return host


def install_in_worker(link):
    """The same memory integration in a pack's worker process (comfy_supervisor.pack_worker), over the
    participant `link` it joined with: admission before its loads, its models in the
    ledger, evictions through upstream's model_unload, releases. No stand-ins: a worker
    evicts only its own models."""
    import comfy.model_management as mm
    return _integrate(mm, link, with_standins=False)
