"""A pack's HTTP routes, answered in its worker (docs/PACKS.md, "A pack's HTTP routes").

Packs add routes to upstream's PromptServer.instance.routes at import, for their front end
to call. The worker's PromptServer (upstream/comfyui_startup.py) keeps them. After the
import, RouteServer describes them to the host, each method and path as the pack declared
it (the host registers the same routes with ComfyUI's server, which serves them), and
answers what the host forwards. It serves the application upstream's add_routes would
make: the pack's routes, each also under /api, on the worker PromptServer's app, where a
pack may have added routes of its own. It runs that PromptServer's event loop on a thread
of its own, as ComfyUI runs its loop beside its prompt thread: a route answers while a
node runs, and what a pack schedules on PromptServer.instance.loop runs.

Each request goes through aiohttp's own server, as one HTTP/1.0 exchange over a socket
pair inside this process, so that the handler gets the request it would get in one
process; the answer is read back whole (a streamed answer arrives at its end), within the
limit the host sent. The host refuses websockets before they reach here.
"""

import asyncio
import logging
import socket
import threading

from ..bridge.channel import ProtocolError
from ..bridge.http_frames import MAX_HEADER_BYTES, checked_request, frame, read_frame
from ..upstream.comfyui_startup import prompt_server

log = logging.getLogger("comfy_supervisor")

# The host holds a request's body to ComfyUI's own upload limit first (--max-upload-size).
MAX_REQUEST_BYTES = 1 << 30
# Request headers that belong to the connection the browser made to ComfyUI, not to this
# exchange, which sets its own.
_CONNECTION_HEADERS = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
                                 "upgrade", "expect", "content-length"})


class RouteAnswerError(RuntimeError):
    """A request this worker could not answer; the message is one line for the host."""


def declared_routes(server):
    """The routes the pack declared, as {"method", "path"}: the RouteDefs of server.routes,
    its static folders as a GET of every path under them, and the routes it added to
    server.app itself. A GET answers HEAD too, as aiohttp's add_get does. Forms the host
    cannot register (sub-applications, routes without a path) are named in a warning and
    left out."""
    from aiohttp import web
    routes, left_out = [], []
    for route in server.app.router.routes():
        path = route.resource.get_info().get("path") if route.resource is not None else None
        if isinstance(path, str):
            routes.append({"method": route.method, "path": path})
        else:
            left_out.append(str(route.resource)[:80])
    for definition in server.routes:
        if isinstance(definition, web.RouteDef):
            routes.append({"method": definition.method, "path": definition.path})
        elif isinstance(definition, web.StaticDef):
            routes.append({"method": "GET", "path": definition.prefix.rstrip("/") + "/{tail:.*}"})
        else:
            left_out.append(repr(definition)[:80])
    if left_out:
        log.warning("comfy-supervisor: %d of the pack's HTTP routes are of a form ComfyUI cannot be given, and are "
                    "not served: %s", len(left_out), "; ".join(left_out))
    with_get = {route["path"] for route in routes if route["method"] == "GET"}
    return [route for route in routes if route["method"] != "HEAD" or route["path"] not in with_get]


class RouteServer:
    """The pack's routes and the thread that answers them."""

    def __init__(self, server, routes):
        self.server = server
        self.routes = routes   # as declared_routes() describes them to the host
        self.loop = None       # the PromptServer's, run by the routes thread from the first connection
        self.runner = None
        self.tasks = set()     # connections served and answers under way (the loop keeps only weak references)

    @classmethod
    def of_worker(cls):
        """The worker's routes, once the pack is imported; None when it declared none."""
        server = prompt_server()
        if server is None or getattr(server, "routes", None) is None or getattr(server, "app", None) is None:
            return None
        routes = declared_routes(server)
        return cls(server, routes) if routes else None

    def connect(self):
        """A socket for one host life, whose requests are answered until the host closes it."""
        if self.loop is None:
            self._start()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        asyncio.run_coroutine_threadsafe(self._serve(ours), self.loop)
        return theirs

    def _start(self):
        loop = self.server.loop
        if not isinstance(loop, asyncio.AbstractEventLoop) or loop.is_running() or loop.is_closed():
            loop = self.server.loop = asyncio.new_event_loop()
        self.loop = loop
        threading.Thread(target=loop.run_forever, name="routes", daemon=True).start()
        asyncio.run_coroutine_threadsafe(self._set_up(), loop).result()

    async def _set_up(self):
        """The application upstream's add_routes makes of the pack's table."""
        from aiohttp import web
        api = web.RouteTableDef()
        for definition in self.server.routes:
            if isinstance(definition, web.RouteDef):
                api.route(definition.method, "/api" + definition.path)(definition.handler, **definition.kwargs)
        self.server.app.add_routes(api)
        self.server.app.add_routes(self.server.routes)
        self.runner = web.AppRunner(self.server.app, handle_signals=False, access_log=None)
        await self.runner.setup()

    async def _serve(self, sock):
        # Held here: the loop keeps tasks only weakly, and the stream's protocol its reader
        # too, so a task waiting on a quiet connection is otherwise garbage.
        serving = asyncio.current_task()
        self.tasks.add(serving)
        reader, writer = await asyncio.open_unix_connection(sock=sock)
        try:
            while (request := await read_frame(reader, MAX_REQUEST_BYTES)) is not None:
                task = asyncio.ensure_future(self._answer(writer, *request))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
        except ProtocolError as error:
            log.error("comfy-supervisor: the host broke the HTTP routes' protocol (%s): its connection is closed",
                      error)
        except OSError:
            pass  # the host's life ended
        finally:
            writer.close()
            self.tasks.discard(serving)

    async def _answer(self, writer, header, body):
        try:
            method, target, headers, limit = checked_request(header)
            status, reason, pairs, content = await self._exchange(method, target, headers, body, limit)
            answer = frame({"id": header.get("id"), "status": status, "reason": reason, "headers": pairs}, content)
        except (RouteAnswerError, ProtocolError, OSError) as error:
            answer = frame({"id": header.get("id"), "error": str(error)})
        if not writer.is_closing():
            writer.write(answer)
            await writer.drain()

    async def _exchange(self, method, target, headers, body, limit):
        """The pack's answer to one request, through aiohttp's server: status, reason,
        headers and body."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        await self.loop.connect_accepted_socket(self.runner.server, ours)
        reader, writer = await asyncio.open_unix_connection(sock=theirs)
        try:
            lines = [f"{method} {target} HTTP/1.0"]
            lines += [f"{name}: {value}" for name, value in headers if name.lower() not in _CONNECTION_HEADERS]
            lines += [f"Content-Length: {len(body)}", "Connection: close"]
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape") + body)
            answer = bytearray()
            while chunk := await reader.read(1 << 16):
                answer += chunk
                if len(answer) > limit + MAX_HEADER_BYTES:
                    raise RouteAnswerError(f"its answer to {method} {target[:80]} is over the {limit} bytes the "
                                           "host takes back from a pack's route")
        finally:
            writer.close()
        return parsed_answer(bytes(answer), limit, f"{method} {target[:80]}")


def parsed_answer(answer, limit, what):
    """Status, reason, headers and body of an HTTP/1.0 answer that aiohttp wrote."""
    head, separator, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("utf-8", "surrogateescape").split("\r\n")
    status_line = lines[0].split(" ", 2)
    if not separator or len(status_line) < 2 or not status_line[1].isdigit():
        raise RouteAnswerError(f"its server wrote no HTTP answer to {what} ({lines[0][:60]!r})")
    if len(body) > limit:
        raise RouteAnswerError(f"its answer to {what} is {len(body)} bytes, over the {limit} the host takes back "
                               "from a pack's route")
    headers = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.append([name.strip(), value.strip()])
    return int(status_line[1]), status_line[2] if len(status_line) > 2 else "", headers, body
