"""A pack worker's start, spawn to ready, with a warm template and without (issue 37).

Two packs of the bridge test pack share an interpreter and an environment, so the supervisor
keeps a warm template for them (supervisor/lifecycle/warm_templates.hpp). Once both are
ready, the first is restarted RESTARTS times (comfyctl restart) and each life's start is read
from the supervisor's log: the time of its "spawned pid" line to that of its "ready" line, in
the log's own elapsed seconds. The same again with warm_template off is the cold start,
measured in the same run. No host: a start does not wait on one."""

import json
import os
import re
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
RESTARTS = 5
WAIT_S = 120
_ELAPSED = r"\[\s*([\d.]+)\] "


def start_ms(supervisor, python, warm):
    """The median spawn-to-ready of RESTARTS lives of one pack, in milliseconds."""
    comfyctl = os.path.join(os.path.dirname(supervisor), "comfyctl")
    instance = f"bench-start-{os.getpid()}-{'warm' if warm else 'cold'}"
    pack = {"pack": os.path.join(ROOT, "tests/packs/bridge_pack"), "interpreter": python,
            "comfyui": os.path.join(ROOT, "tests/host/fake_comfyui"), "warm_template": warm}
    config = {"device": {"kind": "simulated", "total_bytes": "24GiB"},
              "packs": [{"name": name, "python": pack, "env": {"PYTHONDONTWRITEBYTECODE": "1"}}
                        for name in ("first", "second")]}
    with tempfile.TemporaryDirectory(prefix="bench-start-") as folder:
        path, log_path = os.path.join(folder, "config.json"), os.path.join(folder, "log")
        with open(path, "w") as out:
            json.dump(config, out)
        with open(log_path, "w") as log:
            running = subprocess.Popen([supervisor, "run", "--config", path, "--instance", instance], stderr=log,
                                       stdout=subprocess.DEVNULL)
        try:
            lives = []
            for generation in range(1, RESTARTS + 2):
                if generation > 1:
                    subprocess.run([comfyctl, "--instance", instance, "restart", "first"], check=True,
                                   capture_output=True, timeout=WAIT_S)
                lives.append(_life_ms(log_path, generation))
            return statistics.median(lives[1:])  # the first life started beside the other pack
        finally:
            running.terminate()
            running.wait(timeout=WAIT_S)


def _life_ms(log_path, generation):
    """Spawn to ready of pack `first`'s life `generation`, from the log, once it is there."""
    spawned = re.compile(_ELAPSED + rf"first: spawned pid \d+ \(generation {generation}[,)]")
    ready = re.compile(_ELAPSED + rf"first: ready \(pid \d+, generation {generation}\)")
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        with open(log_path) as log:
            text = log.read()
        began, done = spawned.search(text), ready.search(text)
        if began and done:
            return (float(done.group(1)) - float(began.group(1))) * 1e3
        time.sleep(0.05)
    raise SystemExit(f"bench: pack first's life {generation} was not ready within {WAIT_S} s; its log: {text[-2000:]}")


def figures(supervisor, python):
    warm, cold = start_ms(supervisor, python, True), start_ms(supervisor, python, False)
    return {"pack_worker_start_ms": warm, "pack_worker_cold_start_ms": cold, "cold_start_vs_warm": cold / warm}
