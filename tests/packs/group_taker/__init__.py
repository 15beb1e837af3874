"""The second of two packs that share a type (tests/packs/group_maker): its node takes
group_maker's SHARED_THING and uses it as the object it is, calling its method, and says
whether it is an instance of group_maker's own class, as a pack that reads another's type
does (Impact-Pack taking Impact-Subpack's BBOX_DETECTOR)."""

import os
import sys

if os.environ.get("GROUP_TAKER_PRESTARTUP") != "ran":
    raise ImportError("group_taker's prestartup_script.py did not run before its import")


class ReadSharedThing:
    """Its outputs, and shown as ComfyUI shows a node's text (its "ui"), so that a prompt of
    this node alone says what it read."""
    CATEGORY = "comfy-supervisor tests"
    RETURN_TYPES = ("STRING", "BOOLEAN")
    RETURN_NAMES = ("shout", "group_maker's own")
    FUNCTION = "read"
    OUTPUT_NODE = True

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"thing": ("SHARED_THING",)}}

    def read(self, thing):
        maker = sys.modules.get("group_maker")  # imported by the worker under its folder's name
        shout, own = thing.shout(), maker is not None and isinstance(thing, maker.SharedThing)
        return {"ui": {"text": [shout], "own": [own]}, "result": (shout, own)}


NODE_CLASS_MAPPINGS = {"ReadSharedThing": ReadSharedThing}
WEB_DIRECTORY = "./web"
