"""A custom node pack with one good node class beside classes that cannot describe
themselves: an older-API class whose INPUT_TYPES() raises, and, where the ComfyUI it runs
with has comfy_api, a class of its newer API written for a newer comfy_api (its schema
names an input type this one lacks), as ComfyUI-KJNodes had one. ComfyUI leaves such a
class out and registers the rest; so must the pack's worker, in one line for each."""

CATEGORY = "comfy-supervisor tests"


class Doubles:
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("INT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("INT", {"default": 1})}}

    def run(self, value):
        return (value * 2,)


class ListsMissingFolder:
    """Lists a model folder this ComfyUI does not know, as a pack's loader does."""
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("STRING",)

    @classmethod
    def INPUT_TYPES(cls):
        raise KeyError("no model folder 'unet_gguf' in this ComfyUI")

    def run(self, name):
        return (name,)


NODE_CLASS_MAPPINGS = {"Doubles": Doubles, "ListsMissingFolder": ListsMissingFolder}

try:
    from comfy_api.latest import io
except ImportError:
    io = None  # a ComfyUI without the newer API (our model of upstream): no such class

if io is not None:
    class FromNewerComfyApi(io.ComfyNode):
        @classmethod
        def define_schema(cls):
            return io.Schema(node_id="FromNewerComfyApi", category=CATEGORY,
                             inputs=[io.Image.Input("image")], outputs=[io.NotInThisComfyApi.Output()])

        @classmethod
        def execute(cls, image):
            return io.NodeOutput(image)

    NODE_CLASS_MAPPINGS["FromNewerComfyApi"] = FromNewerComfyApi
