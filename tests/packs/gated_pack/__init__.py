"""A custom node pack whose import takes as long as its test wants, as a real pack's does
(torch, its own dependencies, a download): the import waits until the file its environment
names (GATED_PACK_GATE) exists, at most a minute, so that the test sees the pack's worker
joined but not ready for as long as it looks, then opens the gate."""

import os
import time

_GATE = os.environ.get("GATED_PACK_GATE", "")
_GIVE_UP = time.monotonic() + 60
while _GATE and not os.path.exists(_GATE) and time.monotonic() < _GIVE_UP:
    time.sleep(0.02)


class Gated:
    CATEGORY = "comfy-supervisor tests"
    FUNCTION = "run"
    RETURN_TYPES = ("INT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("INT", {"default": 1})}}

    def run(self, value):
        return (value,)


NODE_CLASS_MAPPINGS = {"Gated": Gated}
