"""A pack's HTTP routes, served by ComfyUI and answered in the pack's worker (docs/PACKS.md,
"A pack's HTTP routes"): the host's end of pack_worker/routes.py.

At ComfyUI's start (Bridges.proxy_nodes, while upstream imports the custom node and before
its server adds the routes of its table), each route a pack's worker described goes into
upstream's PromptServer.instance.routes under the path the pack declared. Upstream then
serves it as it serves a local pack's route, under /api too and behind its own
middlewares. A request to it is forwarded, with its method, path, query, headers and body,
on the socket the pack's current life gave for its routes (RouteClient), and the answer
given back: status, reason, headers, body. Where it cannot be, one line says why in the
answer and in the log: a websocket (501), a pack with no life running (503), a life that
does not answer, or answers more than MAX_ANSWER_BYTES (502).

ComfyUI's router is fixed once its server runs: routes a pack describes later (a pack
fixed and retried, or a life that declares routes its first did not) go into a router of
our own, which a middleware of ComfyUI's application, added at its start, asks for every
request ComfyUI finds no route for (its 404).
"""

import asyncio
import itertools
import logging
import socket

from ..bridge.channel import ProtocolError
from ..bridge.http_frames import checked_answer, frame, read_frame

log = logging.getLogger("comfy_supervisor")

MAX_ANSWER_BYTES = 256 << 20  # a route's answer's body, taken back from a worker
# Answer headers that belong to the worker's own exchange; ComfyUI's server writes its own.
_EXCHANGE_HEADERS = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "date", "server"})


class RouteFailed(RuntimeError):
    """A forwarded request got no answer; the message is one line."""


class RouteClient:
    """One pack life's socket for its routes, used from ComfyUI's event loop; requests on
    it go at once, each answer finds its request by id. close() from any thread."""

    def __init__(self, sock):
        self.sock = sock
        self.opened = None     # the task that makes the socket's streams, in the first request's loop
        self.writer = None
        self.reading = None
        self.waiting = {}      # request id -> the future of its answer
        self.ids = itertools.count(1)
        self.ended = None      # why no more answers come

    async def ask(self, header, body, limit):
        """The answer's header and body to the request `header` with `body`."""
        if self.opened is None:
            self.opened = asyncio.get_running_loop().create_task(self._open())
        await asyncio.shield(self.opened)
        if self.ended is not None:
            raise RouteFailed(self.ended)
        request_id = next(self.ids)
        answer = self.waiting[request_id] = asyncio.get_running_loop().create_future()
        try:
            self.writer.write(frame(dict(header, id=request_id, limit=limit), body))
            await self.writer.drain()
            return await answer
        finally:
            self.waiting.pop(request_id, None)

    async def _open(self):
        try:
            reader, self.writer = await asyncio.open_unix_connection(sock=self.sock)
        except OSError as error:
            self.ended = f"its routes' socket cannot be used ({error})"
            return
        self.reading = asyncio.get_running_loop().create_task(self._read(reader))

    async def _read(self, reader):
        why = "its worker's life ended"
        try:
            while (answer := await read_frame(reader, MAX_ANSWER_BYTES)) is not None:
                waiting = self.waiting.get(answer[0].get("id"))
                if waiting is not None and not waiting.done():
                    waiting.set_result(answer)
        except ProtocolError as error:
            why = f"its worker broke the routes' protocol ({error})"
        except OSError as error:
            why = f"its routes' socket failed ({error})"
        self.ended = why
        for waiting in self.waiting.values():
            if not waiting.done():
                waiting.set_exception(RouteFailed(why))
        self.writer.close()

    def close(self):
        """The life ended: what waits fails at once, and the socket goes."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # the reader sees the end, in its own loop
        except OSError:
            pass
        if self.opened is None:
            self.sock.close()


def checked_routes(value):
    """The routes a worker described, {"method", "path"} each, as (method, path) pairs,
    the malformed left out."""
    routes = []
    for route in value if isinstance(value, list) else ():
        method, path = (route.get("method"), route.get("path")) if isinstance(route, dict) else (None, None)
        if isinstance(method, str) and method.isascii() and (method.isalpha() or method == "*") and \
                isinstance(path, str) and path.startswith("/") and len(path) <= 1000:
            routes.append((method.upper(), path))
    return routes


class PackRoutes:
    """Which pack's routes ComfyUI's server was given, and by whom."""

    def __init__(self):
        self.given = {}         # (method, path) -> the pack whose route it is
        self.late = None        # an aiohttp router of the routes described after ComfyUI started

    def serve_late(self, server):
        """At ComfyUI's start, before its server runs: a middleware of its application that
        answers a request ComfyUI finds no route for (404) from the routes packs describe
        later, so that a pack fixed and retried has its routes without a restart."""
        app = getattr(server, "app", None)
        if app is None or not hasattr(app, "middlewares"):
            return
        from aiohttp import web
        late = self.late = web.UrlDispatcher()

        @web.middleware
        async def late_routes(request, handler):
            response = not_found = None
            try:
                response = await handler(request)
            except web.HTTPNotFound as error:
                not_found = error
            if not_found is not None or response.status == 404:
                found = await late.resolve(request)
                if found.http_exception is None:
                    return await found.handler(request)
            if not_found is not None:
                raise not_found
            return response

        app.middlewares.append(late_routes)

    def register(self, link, server):
        """`link`'s routes into upstream's table, at ComfyUI's start."""
        table = getattr(server, "routes", None)
        if table is None or not hasattr(table, "route"):
            if link.routes:
                log.warning("comfy-supervisor: this ComfyUI's server has no route table: pack %s's %d HTTP routes "
                            "are not served", link.name, len(link.routes))
            return
        # ComfyUI's own, and those of packs in its process: a second route of one method
        # and path would fail upstream's add_routes, and ComfyUI's start with it.
        served = {(route.method, route.path) for route in table if hasattr(route, "method")}
        taken = []
        for method, path in link.routes:
            if (method, path) in served:
                taken.append(f"{method} {path} (ComfyUI's, or a pack's in its process)")
                continue
            owner = self.given.setdefault((method, path), link.name)
            if owner != link.name:
                taken.append(f"{method} {path} (pack {owner}'s)")
                continue
            # No arguments beside the path: upstream's add_routes gives a route's again to
            # a decorator that takes none (its /api copies).
            table.route(method, path)(_forwarder(link))
        if taken:
            log.error("comfy-supervisor: pack %s's HTTP routes %s are served already: they answer there, not in "
                      "its worker", link.name, ", ".join(taken))

    def check_late(self, link):
        """A pack described after ComfyUI's server started (Bridges.register_late): the routes
        it was not given go where serve_late's middleware finds them (under /api too, as
        upstream's are)."""
        missing = [(method, path) for method, path in link.routes if (method, path) not in self.given]
        if not missing:
            return
        named = ", ".join(f"{method} {path}" for method, path in missing[:5]) + \
            (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        if self.late is None:
            log.warning("comfy-supervisor: pack %s declares HTTP routes ComfyUI's server was not given at its start "
                        "(%s): they are served once ComfyUI restarts", link.name, named)
            return
        for method, path in missing:
            self.given[(method, path)] = link.name
            for served in (path, "/api" + path):
                if method == "GET":
                    self.late.add_get(served, _forwarder(link))  # and HEAD, as upstream's GET routes
                else:
                    self.late.add_route(method, served, _forwarder(link))
        log.info("comfy-supervisor: pack %s's HTTP routes %s, described after ComfyUI started, are answered where "
                 "ComfyUI has no route of its own", link.name, named)


def _forwarder(link):
    async def forward(request):
        return await forward_request(link, request)
    return forward


async def forward_request(link, request):
    """`request` answered by `link`'s pack in its worker."""
    from aiohttp import web
    what = f"{request.method} {request.path[:200]}"
    if request.headers.get("Upgrade", "").lower() == "websocket":
        return _refused(501, f"pack {link.name}'s route {what} opens a websocket, which a pack in a worker of its own "
                             "cannot serve: run the pack in ComfyUI's process to use it")
    client = getattr(link.session, "routes", None)
    if client is None:
        return _refused(503, f"{link.why_not_running()}: pack {link.name}'s route {what} cannot be answered now")
    body = await request.read()  # upstream's server holds it to its --max-upload-size
    try:
        header, content = await client.ask({"method": request.method, "target": request.raw_path,
                                            "headers": [[name, value] for name, value in request.headers.items()]},
                                           body, MAX_ANSWER_BYTES)
        status, reason, headers, error = checked_answer(header)
    except (RouteFailed, ProtocolError, OSError) as failure:
        error = str(failure)
    if error is not None:
        return _refused(502, f"pack {link.name} did not answer {what}: {error}")
    # A HEAD's answer says the length its GET's body would have: it keeps the worker's.
    head = request.method == "HEAD"
    dropped = _EXCHANGE_HEADERS - {"content-length"} if head else _EXCHANGE_HEADERS
    kept = [(name, value) for name, value in headers if name.lower() not in dropped]
    return web.Response(status=status, reason=reason or None, headers=kept, body=None if head else content)


def _refused(status, line):
    from aiohttp import web
    log.warning("comfy-supervisor: %s", line)
    return web.Response(status=status, text=line + "\n")
