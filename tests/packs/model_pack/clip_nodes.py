"""model_pack's nodes that use the host's CLIP as upstream's code in a pack does (docs/PACKS.md,
"Replicas"): isolated, it is the host's as a replica, upstream's own CLIP over the host's
text encoder mapped; in one process, the host's own.

- HostClip: upstream's tokenize and encode_from_tokens_scheduled on it; with `patch`, on a
  clone of it with a weight patch of the pack's (a "diff" of `patch` on `key`, as data) and
  its layer set (clip_layer), as a LoRA node's CLIP part would. It says what the CLIP is here
  (facts), and gives back the CLIP it came as; with `keep`, it is kept for EncodeKept.
- ClipLora: a LoRA of the pack's loaded on the CLIP with upstream's load_lora_for_models
  (the host loads it on its CLIP: its patches are adapter objects), then an encode.
- EncodeKept: the CLIP kept last encodes again in this later call (after the host evicted
  it, in the checks), then is let go.
"""

import json

import torch

from .replica_nodes import facts

CATEGORY = "comfy-supervisor tests"
KEPT = []  # the CLIPs HostClip was asked to keep, for EncodeKept


def encoded(clip, text, key="", patch=0.0):
    if patch:
        clip = clip.clone()
        weight = clip.cond_stage_model.state_dict()[key]
        diff = torch.randn(weight.shape, generator=torch.Generator().manual_seed(4), dtype=weight.dtype) * patch
        clip.add_patches({key: ("diff", (diff,))})
        clip.clip_layer(-2)
    return clip.encode_from_tokens_scheduled(clip.tokenize(text))


class HostClip:
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("CONDITIONING", "STRING", "CLIP")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"clip": ("CLIP",), "text": ("STRING", {"default": ""})},
                "optional": {"key": ("STRING", {"default": ""}), "patch": ("FLOAT", {"default": 0.0}),
                             "keep": ("BOOLEAN", {"default": False})}}

    def run(self, clip, text, key="", patch=0.0, keep=False):
        if keep:
            KEPT.append(clip)
        return (encoded(clip, text, key, patch), json.dumps(facts(clip, "cond_stage_model")), clip)


class ClipLora:
    """A LoRA of the pack's (a seeded diff of `key`, as our fake ComfyUI's LoRA files hold)
    loaded with upstream's comfy.sd.load_lora_for_models on the CLIP alone, as CLIP LoRA
    nodes do; the patched CLIP encodes `text`."""
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("CONDITIONING",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"clip": ("CLIP",), "text": ("STRING", {"default": ""}), "key": ("STRING",)}}

    def run(self, clip, text, key):
        import comfy.sd
        shape = clip.cond_stage_model.state_dict()[key].shape
        lora = {key: torch.randn(shape, generator=torch.Generator().manual_seed(9)) * 0.05}
        _, patched = comfy.sd.load_lora_for_models(None, clip, lora, 0.0, 0.8)
        return (patched.encode_from_tokens_scheduled(patched.tokenize(text)),)


class EncodeKept:
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("CONDITIONING", "STRING")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"text": ("STRING", {"default": ""})}}

    def run(self, text):
        kept = KEPT.pop()
        return (encoded(kept, text), json.dumps(facts(kept, "cond_stage_model")))


NODE_CLASS_MAPPINGS = {cls.__name__: cls for cls in (HostClip, ClipLora, EncodeKept)}
