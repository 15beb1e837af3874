"""comfyui-check's step over a pack's HTTP routes (tests/packs/routes_pack, run isolated as
pack "routes"):

16. ComfyUI's own server serves the pack's routes, answered in its worker: the checks of
   tests/host/route_checks.py, over real HTTP to ComfyUI's port. After a garbage
   collection in the worker (what serves the routes must outlive it): method, path with a
   pattern, query, headers, cookies and a 1 MiB body reach the pack's handler as sent;
   status, reason, headers, JSON, binary, a file and a static folder come back as the pack
   made them, under /api too; a route the pack added to its app itself answers, a
   handler's error is a 500 and a websocket a 501 in one line. Then a prompt runs the
   pack's WaitForRoute node, which waits until the pack's release route is called: the
   route must answer while the node runs, and the node end released.
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests" / "host"))
import route_checks  # noqa: E402

ROUTES_PACK = pathlib.Path(__file__).resolve().parents[2] / "tests" / "packs" / "routes_pack"
ROUTES_STEP = 16
TITLE = "a pack's HTTP routes through ComfyUI's server, answered in its worker, also while its node runs"


def step_routes(check):
    ask = route_checks.asker(check.port)

    def run_node():
        _, entry, why = check.run_prompt({"1": {"class_type": "WaitForRoute", "inputs": {"seconds": 30}}})
        return why or entry["outputs"]["1"]["text"][0]

    try:
        route_checks.check_routes(ask)
        route_checks.check_during_node(ask, run_node)
    except (AssertionError, OSError) as error:
        check.step(ROUTES_STEP, TITLE, False, str(error).splitlines()[0] if str(error) else type(error).__name__)
        return
    check.step(ROUTES_STEP, TITLE, True, "13 routes answered as the pack made them, a garbage collection in the "
                                         "worker between them; a websocket refused with 501; "
                                         "the release route answered while WaitForRoute ran, and it ended released")
