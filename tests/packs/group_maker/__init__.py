"""The first of two packs that share a type, for the pack groups' tests (docs/PACKS.md,
"Pack groups"): its node makes a SHARED_THING, an object of a class of its own, which
tests/packs/group_taker's node uses as it is. Run as one group the object passes between
them as within one pack; as two packs it stays in this pack's worker, a handle the other
pack cannot take."""

import os

if os.environ.get("GROUP_MAKER_PRESTARTUP") != "ran":
    raise ImportError("group_maker's prestartup_script.py did not run before its import")


class SharedThing:
    """What the graph carries as SHARED_THING: used only by nodes in this process."""

    def __init__(self, text):
        self.text = text

    def shout(self):
        return self.text.upper() + "!"


class MakeSharedThing:
    CATEGORY = "comfy-supervisor tests"
    RETURN_TYPES = ("SHARED_THING",)
    FUNCTION = "make"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"text": ("STRING", {"default": "shared"})}}

    def make(self, text):
        return (SharedThing(text),)


NODE_CLASS_MAPPINGS = {"MakeSharedThing": MakeSharedThing}
NODE_DISPLAY_NAME_MAPPINGS = {"MakeSharedThing": "Make a shared thing"}
WEB_DIRECTORY = "./web"
