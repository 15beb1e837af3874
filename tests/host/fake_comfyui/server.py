"""Our model of upstream's server.py, as far as packs and comfy_supervisor use it: the one
PromptServer instance, its route table and aiohttp application, add_routes (each route of
the table also under /api, as upstream's), which client and node a prompt runs for, and
send_sync, which here keeps what it would send the browser (`sent`) for a test to read. It
imports nodes first, as upstream's does. Serving is the test's: it runs `app` where it
wants it."""

import nodes  # noqa: F401 (upstream's server imports it, with its change to the module path)
from aiohttp import web


class PromptServer:
    instance = None

    def __init__(self, loop=None):
        PromptServer.instance = self
        self.loop = loop
        self.routes = web.RouteTableDef()
        self.app = web.Application(client_max_size=100 << 20)  # upstream's default --max-upload-size
        self.client_id = None
        self.last_node_id = None
        self.sent = []

    def add_routes(self):
        api = web.RouteTableDef()
        for route in self.routes:
            if isinstance(route, web.RouteDef):
                api.route(route.method, "/api" + route.path)(route.handler, **route.kwargs)
        self.app.add_routes(api)
        self.app.add_routes(self.routes)

    def send_sync(self, event, data, sid=None):
        self.sent.append((event, data, sid))
