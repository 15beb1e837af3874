"""A custom node pack for the HTTP routes' tests (docs/PACKS.md, "A pack's HTTP routes"):
routes added at import as real packs add them, to PromptServer.instance.routes (a path with
a pattern, every method, JSON and binary answers, a status of its own, a file, a static
folder, a websocket, a garbage collection) and to PromptServer.instance.app itself; a node that waits until a
route releases it, which only works if routes are answered while a node runs; and a node
that ends its worker."""

import asyncio
import gc
import os
import threading

from aiohttp import web
from server import PromptServer

HERE = os.path.dirname(os.path.abspath(__file__))
routes = PromptServer.instance.routes
_released = threading.Event()


@routes.get("/routes_pack/echo/{name:.+}")
async def echo(request):
    """What the request was, as the handler sees it."""
    return web.json_response({"name": request.match_info["name"], "method": request.method, "path": request.path,
                              "query": [[key, value] for key, value in request.query.items()],
                              "header": request.headers.get("X-Routes-Test"),
                              "cookie": request.cookies.get("flavour")})


@routes.post("/routes_pack/echo")
async def echo_body(request):
    """The body reversed, as binary, with a status and headers of its own."""
    body = await request.read()
    response = web.Response(status=201, body=body[::-1], content_type="application/octet-stream",
                            headers={"X-Body-Length": str(len(body))})
    response.set_cookie("seen", "yes")
    return response


@routes.route("*", "/routes_pack/any")
async def any_method(request):
    return web.Response(text=request.method)


@routes.get("/routes_pack/teapot")
async def teapot(request):
    return web.Response(status=418, reason="I'm a teapot", text="short and stout")


@routes.get("/routes_pack/bytes")
async def some_bytes(request):
    count = int(request.query.get("count", "0"))
    return web.Response(body=bytes(range(256)) * (count // 256) + bytes(range(count % 256)),
                        content_type="application/octet-stream")


@routes.get("/routes_pack/file")
async def a_file(request):
    return web.FileResponse(os.path.join(HERE, "static", "note.txt"))


@routes.get("/routes_pack/raises")
async def raises(request):
    raise RuntimeError("the route's own error")


@routes.get("/routes_pack/socket")
async def websocket(request):
    socket = web.WebSocketResponse()
    await socket.prepare(request)
    await socket.send_str("hello")
    await socket.close()
    return socket


@routes.post("/routes_pack/collect")
async def collect(request):
    """A garbage collection in the worker soon after this answer, while no request is under
    way: what serves the next must outlive it."""
    asyncio.get_running_loop().call_later(0.2, gc.collect)
    return web.json_response({"collecting": True})


@routes.post("/routes_pack/release")
async def release(request):
    """Lets WaitForRoute's node end: answered while that node runs."""
    _released.set()
    return web.json_response({"released": True})


@routes.get("/routes_pack/loop")
async def on_loop(request):
    """Something scheduled on PromptServer.instance.loop, as packs schedule work there."""
    ran = asyncio.get_running_loop().create_future()
    PromptServer.instance.loop.call_soon_threadsafe(ran.set_result, "the PromptServer's loop ran it")
    return web.Response(text=await ran)


routes.static("/routes_pack/static", os.path.join(HERE, "static"))


async def direct(request):
    return web.Response(text="added to the app itself")


PromptServer.instance.app.router.add_get("/routes_pack/direct", direct)


class WaitForRoute:
    """Waits until POST /routes_pack/release comes (or `seconds` pass), and shows which."""
    CATEGORY = "comfy-supervisor tests"
    FUNCTION = "run"
    RETURN_TYPES = ("STRING",)
    OUTPUT_NODE = True

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"seconds": ("FLOAT", {"default": 10.0})}}

    def run(self, seconds):
        released = _released.wait(seconds)
        _released.clear()
        text = "released by the route" if released else "not released"
        return {"ui": {"text": [text]}, "result": (text,)}


class EndWorker:
    """Ends this worker, as a crash would."""
    CATEGORY = "comfy-supervisor tests"
    FUNCTION = "run"
    RETURN_TYPES = ("INT",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def run(self):
        os._exit(3)


NODE_CLASS_MAPPINGS = {"WaitForRoute": WaitForRoute, "EndWorker": EndWorker}
