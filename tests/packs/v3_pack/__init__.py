"""A custom node pack of ComfyUI's newer node API (comfy_api's io.ComfyNode, "V3"), given
only through comfy_entrypoint() as such packs give their nodes: a node that inverts an
image and says, in its UI text, its hidden inputs (UNIQUE_ID, PROMPT); an async node whose
fingerprint_inputs makes it run again only when its text changes; a node whose
validate_inputs refuses a negative count; a node of lazy inputs, beside a node that fails
if it ever runs; a node that blocks the nodes after it. Run isolated by
scripts/comfyui-check."""

import asyncio

from comfy_api.latest import ComfyExtension, io

CATEGORY = "comfy-supervisor tests"


class V3Invert(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(node_id="V3Invert", display_name="Invert (V3)", category=CATEGORY, is_output_node=True,
                         inputs=[io.Image.Input("image", tooltip="an image to invert")],
                         outputs=[io.Image.Output(display_name="inverted", tooltip="1 - image")],
                         hidden=[io.Hidden.unique_id, io.Hidden.prompt])

    @classmethod
    def execute(cls, image):
        seen = f"node {cls.hidden.unique_id}, prompt of {len(cls.hidden.prompt or {})} nodes"
        return io.NodeOutput(1.0 - image, ui={"text": [seen]})


class V3Echo(io.ComfyNode):
    runs = 0

    @classmethod
    def define_schema(cls):
        return io.Schema(node_id="V3Echo", category=CATEGORY, is_output_node=True,
                         inputs=[io.String.Input("text", default="hello")], outputs=[io.String.Output()])

    @classmethod
    def fingerprint_inputs(cls, text):
        return text

    @classmethod
    async def execute(cls, text):
        await asyncio.sleep(0)
        V3Echo.runs += 1
        return io.NodeOutput(f"{text}, run {V3Echo.runs}", ui={"text": [f"{text}, run {V3Echo.runs}"]})


class V3Count(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(node_id="V3Count", category=CATEGORY, is_output_node=True,
                         inputs=[io.Int.Input("count", default=1, min=-10, max=10)], outputs=[io.Int.Output()])

    @classmethod
    def validate_inputs(cls, count):
        return True if count >= 0 else f"count must not be negative, not {count}"

    @classmethod
    def execute(cls, count):
        return io.NodeOutput(count * 2, ui={"text": [str(count * 2)]})


class V3Choose(io.ComfyNode):
    """Takes one of two lazy images: upstream computes only the one check_lazy_status asks for."""
    @classmethod
    def define_schema(cls):
        return io.Schema(node_id="V3Choose", category=CATEGORY,
                         inputs=[io.Boolean.Input("first"), io.Image.Input("a", lazy=True),
                                 io.Image.Input("b", lazy=True)],
                         outputs=[io.Image.Output()])

    @classmethod
    def check_lazy_status(cls, first, a=None, b=None):
        wanted = "a" if first else "b"
        return [wanted] if (a if first else b) is None else []

    @classmethod
    def execute(cls, first, a=None, b=None):
        return io.NodeOutput(a if first else b)


class V3Fail(io.ComfyNode):
    """Fails whenever it runs: what a lazy input not asked for must never do."""
    @classmethod
    def define_schema(cls):
        return io.Schema(node_id="V3Fail", category=CATEGORY, inputs=[], outputs=[io.Image.Output()])

    @classmethod
    def execute(cls):
        raise RuntimeError("V3Fail ran, though no node asked for its image")


class V3Block(io.ComfyNode):
    """Blocks the nodes after it, with a message upstream reports."""
    @classmethod
    def define_schema(cls):
        return io.Schema(node_id="V3Block", category=CATEGORY, inputs=[io.Image.Input("image")],
                         outputs=[io.Image.Output()])

    @classmethod
    def execute(cls, image):
        return io.NodeOutput(block_execution="V3Block blocked the nodes after it")


class V3Pack(ComfyExtension):
    async def get_node_list(self):
        return [V3Invert, V3Echo, V3Count, V3Choose, V3Fail, V3Block]


async def comfy_entrypoint():
    return V3Pack()
