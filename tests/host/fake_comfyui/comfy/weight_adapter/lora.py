"""Our model of upstream's comfy/weight_adapter/lora.py: a LoRA's patch of one weight as
upstream's load_lora makes it, an object holding its tensors (weights)."""

from .base import WeightAdapterBase


class LoRAAdapter(WeightAdapterBase):
    def __init__(self, loaded_keys, weights):
        self.loaded_keys = loaded_keys
        self.weights = weights
