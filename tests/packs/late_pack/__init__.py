"""A custom node pack for the test of a pack fixed after it failed to import: its import
fails while the file its environment names (LATE_PACK_BROKEN) exists, as a user's broken
pack does until they fix it and retry it (comfyctl retry); its node then registers in the
running ComfyUI."""

import os

_BROKEN = os.environ.get("LATE_PACK_BROKEN", "")
if _BROKEN and os.path.exists(_BROKEN):
    raise ImportError(f"late_pack is broken while {_BROKEN} exists")


class LateNode:
    CATEGORY = "comfy-supervisor tests"
    FUNCTION = "run"
    RETURN_TYPES = ("INT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("INT", {"default": 1})}}

    def run(self, value):
        return (value * 3,)


NODE_CLASS_MAPPINGS = {"LateNode": LateNode}
