"""Stand-in for upstream's comfy/model_management.py: the names comfy_supervisor.comfyui
uses, with upstream's signatures. Weights are bytes on the simulated device, allocated
through `participant` (set by main.py once the host has joined)."""

participant = None
EXTRA_RESERVED_VRAM = 400 * 1024 * 1024
current_loaded_models = []


class _Device:
    type = "cpu"


_DEVICE = _Device()


def get_torch_device():
    return _DEVICE


def soft_empty_cache(force=False):
    pass


class ModelPatcher:
    def __init__(self, size):
        self.size = size
        self.loaded = 0
        self.device = None

    def current_loaded_device(self):
        return self.device

    def model_size(self):
        return self.size

    def loaded_size(self):
        return self.loaded


class LoadedModel:
    def __init__(self, model):
        self.model = model
        self.currently_used = True

    def model_memory(self):
        return self.model.size

    def model_loaded_memory(self):
        return self.model.loaded

    def model_unload(self, memory_to_free=None, unpatch_weights=True):
        # Upstream: a partial unload when it covers the ask, else a detach (True).
        if memory_to_free is not None and memory_to_free < self.model.loaded:
            participant.device_release(memory_to_free)
            self.model.loaded -= memory_to_free
            return False
        participant.device_release(self.model.loaded)
        self.model.loaded = 0
        self.model.device = None
        return True

    def __eq__(self, other):
        return self.model is other.model


def load_models_gpu(models, memory_required=0, force_patch_weights=False, minimum_memory_required=None,
                    force_full_load=False):
    for model in models:
        if not participant.device_allocate(model.size - model.loaded):
            raise RuntimeError("out of device memory")
        model.loaded = model.size
        model.device = _DEVICE
        current_loaded_models.insert(0, LoadedModel(model))
