"""A custom node pack for the test of a pack fixed after it failed to import: its import
fails while the file its environment names (LATE_PACK_BROKEN) exists, as a user's broken
pack does until they fix it and retry it (comfyctl retry); its node then registers in the
running ComfyUI."""

import os

from aiohttp import web
from server import PromptServer

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


@PromptServer.instance.routes.get("/late_pack/hello/{name}")
async def hello(request):
    """A route of a pack ComfyUI's server never saw at its start."""
    return web.json_response({"hello": request.match_info["name"]})


NODE_CLASS_MAPPINGS = {"LateNode": LateNode}
