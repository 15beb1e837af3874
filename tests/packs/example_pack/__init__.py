"""A custom node pack for the pack worker's tests: plain-value nodes, importing
ComfyUI's own comfy package as real packs do."""

import comfy.model_management  # noqa: F401 (a real pack imports ComfyUI's own modules)


class AddNumbers:
    CATEGORY = "comfy-supervisor tests"
    RETURN_TYPES = ("INT",)
    RETURN_NAMES = ("sum",)
    FUNCTION = "add"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"a": ("INT", {"default": 1, "min": 0}), "b": ("INT", {"default": 2})}}

    def add(self, a, b):
        return (a + b,)


class Echo:
    CATEGORY = "comfy-supervisor tests"
    RETURN_TYPES = ("STRING",)
    FUNCTION = "echo"
    OUTPUT_NODE = True

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"text": ("STRING", {"multiline": True})}, "optional": {"mode": (["plain", "loud"],)}}

    @classmethod
    def IS_CHANGED(cls, text, mode="plain"):
        return text

    def echo(self, text, mode="plain"):
        return (text.upper() if mode == "loud" else text,)


NODE_CLASS_MAPPINGS = {"AddNumbers": AddNumbers, "Echo": Echo}
NODE_DISPLAY_NAME_MAPPINGS = {"AddNumbers": "Add two numbers"}
