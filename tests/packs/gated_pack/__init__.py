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
    """The gate its import waited at."""
    CATEGORY = "comfy-supervisor tests"
    FUNCTION = "gate"
    RETURN_TYPES = ("STRING",)
    INPUT_TYPES = classmethod(lambda cls: {"required": {}})

    def gate(self):
        return (_GATE,)


NODE_CLASS_MAPPINGS = {"Gated": Gated}
