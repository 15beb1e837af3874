"""The checks of a pack's HTTP routes (docs/PACKS.md, "A pack's HTTP routes"), run by
bridge_checks.py with tests/packs/routes_pack as "routes": the host's server (our model of
upstream's, given its routes as upstream's add_routes gives them) listens on a port of
this machine, and each check asks it over real HTTP.

    routes          method, path with a pattern, query, headers, cookies and body reach the
                    pack's handler as sent; its status, reason, headers, JSON, binary,
                    file and static answers come back as it made them, under /api too; a
                    route the pack added to its app itself answers; an error in a handler
                    is a 500, and a websocket is refused with 501 in one line
    routes-during-node  a route answers while the pack's node runs: the node waits for it
    routes-limit    an answer over the host's limit is a 502 that says so, and the next
                    answer comes
    routes-restart  the routes answer again in the pack's next life, once its worker died
"""

import asyncio
import http.client
import json
import os
import threading
import time


_port = None
HERE = os.path.dirname(os.path.abspath(__file__))
PACK = os.path.join(os.path.dirname(HERE), "packs", "routes_pack")


def expect(condition, why):
    if not condition:
        raise AssertionError(why)


def serve():
    """The host's server on a port of its own, started once (its router is fixed then)."""
    global _port
    if _port is None:
        import server
        from aiohttp import web
        server.PromptServer.instance.add_routes()
        loop = asyncio.new_event_loop()
        runner = web.AppRunner(server.PromptServer.instance.app)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        _port = runner.addresses[0][1]
        threading.Thread(target=loop.run_forever, name="host server", daemon=True).start()
    return _port


def asker(port):
    """ask(method, path, body, headers): (status, reason, headers, body) of one request to
    the server on `port`."""
    def ask(method, path, body=None, headers=None):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            answer = connection.getresponse()
            return answer.status, answer.reason, answer.headers, answer.read()
        finally:
            connection.close()
    return ask


def check_routes(ask):
    status, _, _, _ = ask("POST", "/routes_pack/collect")
    expect(status == 200, f"a garbage collection in the worker: {status}")
    time.sleep(0.5)  # it ran, between requests
    status, _, headers, body = ask("GET", "/routes_pack/echo/a/b%20c?x=1&x=2&y=",
                                   headers={"X-Routes-Test": "sent", "Cookie": "flavour=mint"})
    seen = json.loads(body)
    expect(status == 200 and headers.get("Content-Type", "").startswith("application/json"), f"echo: {status}")
    expect(seen == {"name": "a/b c", "method": "GET", "path": "/routes_pack/echo/a/b c",
                    "query": [["x", "1"], ["x", "2"], ["y", ""]], "header": "sent", "cookie": "mint"},
           f"the handler saw {seen}")
    status, _, _, body = ask("GET", "/api/routes_pack/echo/under-api")
    expect(status == 200 and json.loads(body)["path"] == "/api/routes_pack/echo/under-api", f"under /api: {status}")
    _, _, _, got = ask("GET", "/routes_pack/file")
    status, _, headers, body = ask("HEAD", "/routes_pack/file")
    expect(status == 200 and body == b"" and headers.get("Content-Length") == str(len(got)),
           f"HEAD: {status}, Content-Length {headers.get('Content-Length')} (its GET's body: {len(got)} bytes)")
    sent = os.urandom(1 << 20)
    status, _, headers, body = ask("POST", "/routes_pack/echo", body=sent)
    expect(status == 201 and body == sent[::-1], f"POST of 1 MiB: {status}, {len(body)} bytes back")
    expect(headers.get("X-Body-Length") == str(len(sent)) and "seen=yes" in headers.get("Set-Cookie", ""),
           f"the answer's own headers: {dict(headers)}")
    for method in ("PUT", "DELETE", "PATCH"):
        status, _, _, body = ask(method, "/routes_pack/any")
        expect(status == 200 and body == method.encode(), f"a route of every method, by {method}: {status} {body!r}")
    status, reason, _, body = ask("GET", "/routes_pack/teapot")
    expect((status, reason, body) == (418, "I'm a teapot", b"short and stout"), f"teapot: {status} {reason} {body}")
    with open(os.path.join(PACK, "static", "note.txt"), "rb") as note:
        expected = note.read()
    for path in ("/routes_pack/file", "/routes_pack/static/note.txt"):
        status, _, _, body = ask("GET", path)
        expect(status == 200 and body == expected, f"{path}: {status} {body[:60]!r}")
    status, _, _, body = ask("GET", "/routes_pack/direct")
    expect(status == 200 and body == b"added to the app itself", f"a route added to the app: {status} {body!r}")
    status, _, _, body = ask("GET", "/routes_pack/loop")
    expect(status == 200 and body == b"the PromptServer's loop ran it", f"PromptServer.instance.loop: {status}")
    status, _, _, _ = ask("GET", "/routes_pack/raises")
    expect(status == 500, f"a handler's error: {status}")
    status, _, _, body = ask("GET", "/routes_pack/socket", headers={
        "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
    line = body.decode().strip()
    expect(status == 501 and "opens a websocket" in line and "\n" not in line, f"a websocket: {status} {line!r}")


def check_during_node(ask, run_node):
    """`run_node()` runs routes_pack's WaitForRoute (30 s) and returns its text."""
    outcome = {}
    waiting = threading.Thread(target=lambda: outcome.update(result=run_node()))
    started = time.monotonic()
    waiting.start()
    time.sleep(0.5)  # the node is running (it waits up to 30 s)
    status, _, _, body = ask("POST", "/routes_pack/release")
    waiting.join()
    expect(status == 200 and json.loads(body) == {"released": True}, f"the release route: {status} {body!r}")
    expect(outcome.get("result") == "released by the route" and time.monotonic() - started < 20,
           f"the node: {outcome.get('result')}")


def check_limit(ask):
    from comfy_supervisor.host import pack_routes
    before = pack_routes.MAX_ANSWER_BYTES
    pack_routes.MAX_ANSWER_BYTES = 1 << 20
    try:
        status, _, _, body = ask("GET", f"/routes_pack/bytes?count={1 << 20}")
        expect(status == 200 and len(body) == 1 << 20 and body[:256] == bytes(range(256)), f"1 MiB: {status}")
        status, _, _, body = ask("GET", f"/routes_pack/bytes?count={(1 << 20) + 1}")
        line = body.decode().strip()
        expect(status == 502 and "over the 1048576 the host takes back" in line and "\n" not in line, f"over: {status} {line!r}")
    finally:
        pack_routes.MAX_ANSWER_BYTES = before
    status, _, _, body = ask("GET", "/routes_pack/bytes?count=300")
    expect(status == 200 and len(body) == 300, f"the answer after: {status}")


def check_restart(ask, node, raises):
    from comfy_supervisor.host import proxy_nodes
    raises(lambda: node("EndWorker", "routes").run(), proxy_nodes.PackWorkerDied)
    deadline, seen = time.monotonic() + 60, []
    while time.monotonic() < deadline:
        status, _, _, body = ask("GET", "/routes_pack/echo/again")
        seen.append(status)
        if status == 200:
            break
        expect(status in (502, 503) and b"\n" not in body.strip(), f"while it restarts: {status} {body[:200]!r}")
        time.sleep(0.2)
    expect(seen[-1] == 200, f"the routes never answered again: {sorted(set(seen))}")


def checks(node, raises):
    def ask(*request, **headers):  # the server starts at the first check: the proxies are registered by then
        return asker(serve())(*request, **headers)
    return {"routes": lambda: check_routes(ask),
            "routes-during-node": lambda: check_during_node(ask, lambda: node("WaitForRoute", "routes").run(
                seconds=30)["result"][0]),
            "routes-limit": lambda: check_limit(ask), "routes-restart": lambda: check_restart(ask, node, raises)}
