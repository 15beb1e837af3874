"""model_pack's node that loads a LoRA of its own over a MODEL it patched (docs/PACKS.md,
"Replicas"): isolated, the clone is the pack's, of its replica of the host's MODEL, and the
LoRA's adapters (upstream's weight adapter objects) are its weight patches, which the
replica's load carries to the host by value; in one process, the host's own clone.

- LoraOverPatched: PatchModel's patches on a clone of the MODEL, then upstream's
  comfy.sd.load_lora_for_models over that clone with a seeded LoRA of `key`.
"""

import torch


class LoraOverPatched:
    CATEGORY = "model_pack"
    FUNCTION = "run"
    RETURN_TYPES = ("MODEL",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",), "key": ("STRING",), "strength": ("FLOAT", {"default": 0.8})}}

    def run(self, model, key, strength):
        import comfy.sd
        from . import PatchModel
        (patched,) = PatchModel().patch(model, 1.05)
        shape = patched.model.state_dict()[key].shape
        lora = {key: torch.randn(shape, generator=torch.Generator().manual_seed(5)) * 0.05}
        loaded, _ = comfy.sd.load_lora_for_models(patched, None, lora, strength, 0.0)
        return (loaded,)


NODE_CLASS_MAPPINGS = {"LoraOverPatched": LoraOverPatched}
