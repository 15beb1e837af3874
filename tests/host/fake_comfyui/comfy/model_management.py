"""Our model of upstream's comfy/model_management.py, for tests without a ComfyUI
checkout: the memory manager's rules as upstream defines them (LoadedModel's unload
ladder, free_memory's candidates, sort and loop, load_models_gpu's dedup, clone eviction,
per-device totals and reuse, unload_all_models, unload_model_and_clones, cleanup_models
through a finalizer), written from their documented behaviour. Weights are bytes on the
simulated device, allocated through `participant` (set by main.py once the host joined);
the device is "cuda:0" to upstream, as a real GPU would be, and the CPU is a device too,
never charged. A process that has no participant here (a pack's worker over this model:
only the host's main.py sets one) charges nothing and sees the device free; its loads
are in the ledger all the same, by the memory integration. It proves our side of the
contract, not upstream's."""

import sys
import uuid
import weakref

import torch

participant = None
EXTRA_RESERVED_VRAM = 400 * 1024 * 1024
DISABLE_SMART_MEMORY = False
current_loaded_models = []


# Upstream's devices are torch's; nothing here computes on the GPU one (no CUDA needed).
GPU = torch.device("cuda", 0)
CPU = torch.device("cpu")


def get_torch_device():
    return GPU


def get_free_memory(device=None, torch_free_too=False):
    device = device or GPU
    free = participant.device_free() if device == GPU and participant is not None else 1 << 40
    return (free, 0) if torch_free_too else free


def soft_empty_cache(force=False):
    pass


def minimum_inference_memory():
    return 0.8 * (1 << 30) + EXTRA_RESERVED_VRAM


class Module:
    """Stands for the nn.Module: weak-referenceable, with a class name."""


class ModelPatcher:
    """The patcher members upstream's memory manager reads, over device bytes."""

    def __init__(self, size, load_device=GPU, offload_device=CPU, patches=()):
        self.size = size
        self.loaded = 0
        self.load_device = load_device
        self.offload_device = offload_device
        self.model = Module()
        self.parent = None
        self.clone_base_uuid = uuid.uuid4()
        self.patches = list(patches)
        self.fail_unload = None    # an exception to raise from the next unloads, for tests
        self.unload_delay_s = 0.0  # how long an unload takes, for tests of concurrent unloads
        self.unloading = False

    def model_size(self):
        return self.size

    def loaded_size(self):
        return self.loaded

    def current_loaded_device(self):
        return self.load_device if self.loaded > 0 else self.offload_device

    def model_patches_to(self, device_or_dtype):
        pass

    def model_dtype(self):
        return None

    def model_patches_models(self):
        return list(self.patches)

    def is_clone(self, other):
        return hasattr(other, "model") and self.model is other.model

    def is_dynamic(self):
        return False

    def get_nested_additional_models(self):
        return []

    def _charge(self, nbytes):
        if self.load_device == GPU and participant is not None and not participant.device_allocate(nbytes):
            raise RuntimeError("out of device memory")

    def _uncharge(self, nbytes):
        if self.load_device == GPU and participant is not None:
            participant.device_release(nbytes)

    def __del__(self):
        # A dead model's weights are freed with it, as torch frees a dead tensor's memory.
        if self.loaded and participant is not None:
            self._uncharge(self.loaded)

    def partially_load(self, device, extra_memory, force_patch_weights=False):
        more = int(min(extra_memory, self.size - self.loaded))
        self._charge(more)
        self.loaded += more
        return more

    def _unloading(self):
        import time
        if self.fail_unload is not None:
            raise self.fail_unload
        self.unloading = True
        time.sleep(self.unload_delay_s)

    def partially_unload(self, device, memory_to_free):
        self._unloading()
        freed = int(min(memory_to_free, self.loaded))
        self._uncharge(freed)
        self.loaded -= freed
        self.unloading = False
        return freed

    def detach(self, unpatch_all=True):
        self._unloading()
        self._uncharge(self.loaded)
        self.loaded = 0
        self.unloading = False


class LoadedModel:
    def __init__(self, model):
        self._model = weakref.ref(model)
        self.device = model.load_device
        self.real_model = None
        self.currently_used = True
        self.model_finalizer = None

    @property
    def model(self):
        return self._model()

    def model_memory(self):
        return self.model.model_size()

    def model_loaded_memory(self):
        return self.model.loaded_size()

    def model_offloaded_memory(self):
        return self.model.model_size() - self.model.loaded_size()

    def model_memory_required(self, device):
        if device == self.model.current_loaded_device():
            return self.model_offloaded_memory()
        return self.model_memory()

    def model_load(self, lowvram_model_memory=0, force_patch_weights=False):
        self.model.model_patches_to(self.device)
        self.model.model_patches_to(self.model.model_dtype())
        self.model.partially_load(self.device, lowvram_model_memory or 1e32, force_patch_weights=force_patch_weights)
        real_model = self.model.model
        self.real_model = weakref.ref(real_model)
        self.model_finalizer = weakref.finalize(real_model, cleanup_models)
        self.model_finalizer.atexit = False
        return real_model

    def model_unload(self, memory_to_free=None, unpatch_weights=True):
        # A partial unload when it covers the ask; otherwise (or short of it) a detach.
        if memory_to_free is not None and memory_to_free < self.model.loaded_size():
            freed = self.model.partially_unload(self.model.offload_device, memory_to_free)
            if freed >= memory_to_free:
                return False
        self.model.detach(unpatch_weights)
        self.model_finalizer.detach()
        self.model_finalizer = None
        self.real_model = None
        return True

    def __eq__(self, other):
        return self.model is other.model

    def is_dead(self):
        return self.real_model() is not None and self.model is None


def cleanup_models():
    for i in range(len(current_loaded_models) - 1, -1, -1):
        if current_loaded_models[i].real_model() is None:
            current_loaded_models.pop(i)


def free_memory(memory_required, device, keep_loaded=[], for_dynamic=False, pins_required=0, ram_required=0):
    candidates = []
    for i in range(len(current_loaded_models) - 1, -1, -1):
        entry = current_loaded_models[i]
        if (device is None or entry.device == device) and entry not in keep_loaded and not entry.is_dead():
            candidates.append((-entry.model_offloaded_memory(), sys.getrefcount(entry.model), entry.model_memory(), i))
            entry.currently_used = False
    unloaded = []
    for *_, i in sorted(candidates):
        memory_to_free = 1e32
        if not DISABLE_SMART_MEMORY or device is None:
            memory_to_free = 0 if device is None else memory_required - get_free_memory(device)
        if memory_to_free > 0 and current_loaded_models[i].model_unload(memory_to_free):
            unloaded.append(i)
    return [current_loaded_models.pop(i) for i in sorted(unloaded, reverse=True)]


def load_models_gpu(models, memory_required=0, force_patch_weights=False, minimum_memory_required=None,
                    force_full_load=False):
    extra_mem = max(minimum_inference_memory(), memory_required + EXTRA_RESERVED_VRAM)
    unique = {}
    for m in models:
        unique[m] = None
        for extra in m.model_patches_models():
            unique[extra] = None
    ordered = list(unique)
    ordered.reverse()
    to_load = []
    for patcher in ordered:
        fresh = LoadedModel(patcher)
        if fresh in current_loaded_models:
            reused = current_loaded_models[current_loaded_models.index(fresh)]
            reused.currently_used = True
            to_load.append(reused)
        else:
            to_load.append(fresh)
    for entry in to_load:
        # Every entry sharing the weights leaves the list; the weights stay loaded.
        for i in range(len(current_loaded_models) - 1, -1, -1):
            if entry.model.is_clone(current_loaded_models[i].model):
                current_loaded_models.pop(i).model_finalizer.detach()
    need = {}
    for entry in to_load:
        need[entry.device] = need.get(entry.device, 0) + entry.model_memory_required(entry.device)
    for device, nbytes in need.items():
        if device != CPU:
            free_memory(nbytes * 1.1 + extra_mem, device)
    for entry in to_load:
        entry.model_load(0, force_patch_weights=force_patch_weights)
        current_loaded_models.insert(0, entry)


def unload_all_models():
    free_memory(1e30, get_torch_device())


def unload_model_and_clones(model, unload_additional_models=True, all_devices=False):
    family = {model.clone_base_uuid}
    if unload_additional_models:
        family.update(extra.clone_base_uuid for extra in model.get_nested_additional_models())
    keep = [entry for entry in current_loaded_models if entry.model is not None and
            entry.model.clone_base_uuid not in family]
    free_memory(1e30, get_torch_device(), keep)


# Interrupts and out-of-memory, as upstream defines them: a flag under a lock that nodes
# poll, the exception that ends the node, and torch's OOM error as upstream's.
import threading  # noqa: E402
import torch  # noqa: E402

OOM_EXCEPTION = torch.cuda.OutOfMemoryError


class InterruptProcessingException(Exception):
    pass


interrupt_processing_mutex = threading.RLock()
interrupt_processing = False


def interrupt_current_processing(value=True):
    global interrupt_processing
    with interrupt_processing_mutex:
        interrupt_processing = value


def processing_interrupted():
    with interrupt_processing_mutex:
        return interrupt_processing


def throw_exception_if_processing_interrupted():
    global interrupt_processing
    with interrupt_processing_mutex:
        if interrupt_processing:
            interrupt_processing = False
            raise InterruptProcessingException()
