"""ComfyUI as the host participant of comfy-supervisor (slot 0).

install() is called by the custom node in worker/python/comfyui_custom_node when the
supervisor started this ComfyUI (COMFY_SV_SLOT set). It then:

- wraps comfy.model_management.load_models_gpu: before upstream loads, it asks the
  supervisor to admit the bytes it will load (keep_loaded: the models being loaded, when
  already in the ledger) and publishes the granted reserve into upstream's
  EXTRA_RESERVED_VRAM, so ComfyUI's own arithmetic accounts for what the other processes
  hold; after it, every entry of current_loaded_models is registered or its residency
  reported, and the ones that left are dropped;
- answers the supervisor's commands from a background thread: partial_unload(n) runs the
  matching LoadedModel's model_unload(memory_to_free=n), detach runs model_unload(), each
  answered with the bytes measured freed (loaded size before minus after);
  full_release, cast_epoch_boundary, partial_release and release_node_boundary run
  soft_empty_cache() and reset_cast_buffers() where present, answered with the drop in
  torch's reserved bytes; release_pins runs free_pins(n) where present; Shutdown ends the
  process as SIGTERM would (ComfyUI has no shutdown entry point);
- wraps execution.PromptExecutor.execute: a whole prompt is one busy stretch
  (node_started before, node_finished after). Commands that arrive meanwhile wait for its
  end, where they run, since unloading a model a sampler is using is not safe. ComfyUI
  has no clean per-node hook, so release_node_boundary comes only between prompts.

Both wraps replace module and class attributes: code that imported load_models_gpu by
name before install() keeps upstream's function and bypasses admission.

NOT RUN AGAINST A REAL ComfyUI: torch and ComfyUI cannot be installed where this project
is built and tested. The protocol side is tested through examples/host_participant.py,
which drives the same Participant class; the upstream names used here follow
comfy/model_management.py and may need
adjusting when upstream changes them.
"""

import logging
import os
import signal
import threading

from . import participant as sv

log = logging.getLogger("comfy_supervisor")

_COMMAND_WAIT_S = 1.0  # how often the command thread also refreshes the census


class _Host:
    def __init__(self, mm, link):
        self.mm = mm      # comfy.model_management
        self.link = link  # sv.Participant
        # Upstream's current_loaded_models is touched by the prompt thread and ours.
        self.lock = threading.RLock()
        self.ids = {}         # id(ModelPatcher) -> ledger model id
        self.reported = {}    # ledger model id -> (loaded bytes, currently used) last sent
        self.next_id = 1
        self.busy = False
        self.admitting = False  # the prompt thread waits for an admission: evictions run now
        self.deferred = []    # commands that arrived during a prompt
        self.epoch = 0

    # ---- the ledger ----

    def model_id(self, patcher):
        key = id(patcher)
        if key not in self.ids:
            self.ids[key] = self.next_id
            self.next_id += 1
        return self.ids[key]

    def sync_ledger(self, used=()):
        """Reports current_loaded_models to the ledger: new entries, changed residency, the gone.
        `used`: id()s of the patchers a load just used, which move to the front of the order
        (upstream re-inserts them at index 0)."""
        with self.lock:
            present = set()
            for loaded in list(self.mm.current_loaded_models):
                patcher = loaded.model
                if patcher is None:
                    continue
                model_id = self.model_id(patcher)
                present.add(model_id)
                figures = (loaded.model_loaded_memory(), bool(loaded.currently_used))
                if model_id not in self.reported:
                    dynamic = bool(getattr(patcher, "is_dynamic", lambda: False)())
                    self.link.register_model(model_id, loaded.model_memory(), figures[0], dynamic=dynamic)
                just_used = id(patcher) in used
                if self.reported.get(model_id) != figures or just_used:
                    # One reference, as the workers report: upstream's sys.getrefcount
                    # counts this process's internals, which mean nothing across processes.
                    self.link.report_residency(model_id, figures[0], references=1, currently_used=figures[1],
                                               just_used=just_used)
                    self.reported[model_id] = figures
            for model_id in set(self.reported) - present:
                self.link.drop_model(model_id)
                del self.reported[model_id]
                self.ids = {key: value for key, value in self.ids.items() if value != model_id}

    def loaded_entry(self, model_id):
        for loaded in self.mm.current_loaded_models:
            if loaded.model is not None and self.ids.get(id(loaded.model)) == model_id:
                return loaded
        return None

    # ---- loading: admission first ----

    def load_models_gpu(self, original, models, *args, **kwargs):
        memory_required = kwargs.get("memory_required", args[0] if args else 0)
        device = self.mm.get_torch_device()
        with self.lock:
            # Upstream's model_memory_required(): what is not on the device yet.
            needed = 0
            for patcher in models:
                if patcher.current_loaded_device() == device:
                    needed += patcher.model_size() - patcher.loaded_size()
                else:
                    needed += patcher.model_size()
            # Upstream takes the models of this load out of current_loaded_models before
            # free_memory: every one of them is kept, however many.
            keep = [self.ids[id(m)] for m in models if id(m) in self.ids]
        if needed > 0:
            # Not under the lock: while we wait, the supervisor may ask our thread to evict.
            # streams x largest tensor + reserve stands for upstream's
            # memory_required + extra_reserved_memory().
            # Our own other models are candidates too, as in upstream's one list: the command
            # thread answers their evictions now, as upstream's free_memory would run them here.
            with self.lock:
                self.admitting = True
            try:
                answer = self.link.request_admission(needed, largest_tensor=int(memory_required), streams=1,
                                                     keep_loaded=keep)
            finally:
                with self.lock:
                    self.admitting = False
            if not answer.granted:
                raise RuntimeError(answer.refusal())
            if answer.shortfall:
                log.warning("comfy-supervisor admitted this load %d bytes short (policy admit)", answer.shortfall)
            self.mm.EXTRA_RESERVED_VRAM = answer.reserve_bytes
        with self.lock:
            try:
                return original(models, *args, **kwargs)
            finally:
                self.sync_ledger(used={id(m) for m in models})

    # ---- commands ----

    def serve(self):
        try:
            while True:
                command = self.link.next_command(_COMMAND_WAIT_S)
                if command is None:
                    self.publish_census()
                    continue
                if command.type == sv.SHUTDOWN:
                    log.info("comfy-supervisor asked ComfyUI to finish; ending the process")
                    os.kill(os.getpid(), signal.SIGTERM)
                    return
                with self.lock:
                    if self.busy and not (self.admitting and command.type in (sv.PARTIAL_UNLOAD, sv.DETACH)):
                        self.deferred.append(command)
                        continue
                    self.answer(command)
        except sv.ParticipantError as error:
            log.error("comfy-supervisor: %s; ending ComfyUI so the supervisor restarts it", error)
            os.kill(os.getpid(), signal.SIGTERM)

    def answer(self, command):
        if command.type in (sv.PARTIAL_UNLOAD, sv.DETACH):
            freed, asked, after = self.unload(command)
            self.link.send_unload_receipt(command, freed, after, bytes_requested=asked)
            self.sync_ledger()
        elif command.type == sv.RELEASE_PINS:
            free_pins = getattr(self.mm, "free_pins", None)
            freed = free_pins(command.bytes) if free_pins else 0
            self.link.send_release_receipt(command, int(freed))
        elif command.type in sv.RELEASES:
            self.link.send_release_receipt(command, self.release_caches())

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
        if detached:
            # As upstream's free_memory: a detached model leaves current_loaded_models.
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
        import torch  # ComfyUI's own dependency, loaded already
        device = self.mm.get_torch_device()
        return torch.cuda.memory_reserved(device) if device.type == "cuda" else 0

    def publish_census(self):
        import torch
        device = self.mm.get_torch_device()
        on_cuda = device.type == "cuda"
        self.link.update_census(
            pinned_bytes=max(0, int(getattr(self.mm, "TOTAL_PINNED_MEMORY", 0))),
            pinned_ceiling=max(0, int(getattr(self.mm, "MAX_PINNED_MEMORY", 0))),
            allocator_reserved=torch.cuda.memory_reserved(device) if on_cuda else 0,
            allocator_active=torch.cuda.memory_allocated(device) if on_cuda else 0,
            resident_set_bytes=sv.resident_set_bytes(),
            prompt_epoch=self.epoch)

    # ---- prompts: busy from start to end ----

    def execute(self, original, executor, *args, **kwargs):
        with self.lock:
            self.epoch += 1
            epoch = self.epoch
            self.busy = True
        self.link.node_started(epoch)
        try:
            return original(executor, *args, **kwargs)
        finally:
            self.link.node_finished(epoch, ok=bool(getattr(executor, "success", True)))
            with self.lock:
                self.busy = False
                deferred, self.deferred = self.deferred, []
                for command in deferred:
                    self.answer(command)
                self.sync_ledger()


def install():
    """Makes this ComfyUI process the supervisor's host participant; None when ComfyUI was
    not started by the supervisor. Raises sv.ParticipantError with one line on failure."""
    if not os.environ.get("COMFY_SV_SLOT"):
        return None
    import comfy.model_management as mm
    import execution

    link = sv.Participant(capabilities=sv.CAP_PARTIAL_UNLOAD | sv.CAP_PINNED_MEMORY)
    host = _Host(mm, link)

    original_load = mm.load_models_gpu

    def load_models_gpu(models, *args, **kwargs):
        return host.load_models_gpu(original_load, models, *args, **kwargs)

    mm.load_models_gpu = load_models_gpu

    original_execute = execution.PromptExecutor.execute

    def execute(executor, *args, **kwargs):
        return host.execute(original_execute, executor, *args, **kwargs)

    execution.PromptExecutor.execute = execute

    threading.Thread(target=host.serve, name="comfy-supervisor", daemon=True).start()
    log.info("comfy-supervisor: this ComfyUI is the host participant (slot %d, generation %d)",
             link.slot, link.generation)
    return host
