"""Our model of upstream's comfy/weight_adapter: a LoRA's patch of one weight as upstream's
load_lora makes it, an object holding its tensors (weights), not data."""


class LoRAAdapter:
    def __init__(self, loaded_keys, weights):
        self.loaded_keys = loaded_keys
        self.weights = weights
