"""scripts/bench idle [--json]: what idle Python participants cost the machine. The supervisor
runs eight pack workers (tests/packs/example_pack in the config's `python` form, Debian's
Python 3.11 with its torch, over our model of upstream) beside a filler participant
(ledger_filler.py). Nothing calls them. Their CPU (every thread's, from /proc's schedstat)
is measured over a window with an empty ledger, then again after the filler has put a
million models in the ledger, in the same run, so that one is compared with the other:

- idle_cpu_empty_ledger_pct: the eight workers' CPU, in percent of one CPU, ledger empty;
- idle_cpu_1m_ledger_pct: the same with 1,048,576 ledger rows (target < 1, and < 0.5 empty);
- ledger_read_1m_ms: one participant's read of that ledger when it changed (the C library's
  read and sort, and Python's objects): what every look at the ledger cost, every 0.5 s,
  when every look read it;
- ledger_look_unchanged_us: a look at the same ledger while it stands still (the
  generation loaded, the tuple read last returned), in the same process.

Each window starts once the workers have settled: their CPU over 2 s below 2% of a CPU
(start-up imports, the reads while the ledger fills), or after 300 s."""

import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
WORKERS = 8
MODELS = 1 << 20
WINDOW_S = float(os.environ.get("COMFY_IDLE_WINDOW_S", "20"))
SETTLED_PCT = 2.0  # the workers' CPU over 2 s below this: their imports and reads are done
SETTLE_MAX_S = 300.0
REFRESH_S = 0.5  # the participants' look at the ledger (comfy_supervisor.host.comfyui.REFRESH_S)


def config(python, folder):
    env = {"PYTHONPATH": os.path.join(ROOT, "worker/python"), "PYTHONDONTWRITEBYTECODE": "1"}
    packs = [{"name": "filler", "command": python,
              "args": [os.path.join(ROOT, "tests/bench/idle/ledger_filler.py"), folder], "env": env}]
    packs += [{"name": f"idle{i}",
               "python": {"pack": os.path.join(ROOT, "tests/packs/example_pack"), "interpreter": python,
                          "comfyui": os.path.join(ROOT, "tests/host/fake_comfyui")},
               "env": {"PYTHONDONTWRITEBYTECODE": "1"}} for i in range(1, WORKERS + 1)]
    return {"device": {"kind": "simulated", "total_bytes": "24GiB"},
            "limits": {"heartbeat_timeout_ms": 20000, "handshake_timeout_ms": 120000, "participants": 16,
                       "ledger_entries": MODELS},
            "memory": {"ledger_quota": MODELS},
            "packs": packs}


def workers(comfyctl, instance):
    out = subprocess.run([comfyctl, "workers", "--json", "--instance", instance], capture_output=True, text=True)
    if out.returncode != 0:
        return []
    report = json.loads(out.stdout)
    return report["workers"] if isinstance(report, dict) else report


def cpu_ns(pid):
    """Every thread's time on a CPU so far (schedstat: nanoseconds)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as source:
                total += int(source.read().split()[0])
        except FileNotFoundError:
            pass  # a thread that ended meanwhile
    return total


def cpu_pct(pids, seconds):
    before = sum(cpu_ns(pid) for pid in pids)
    started = time.monotonic()
    time.sleep(seconds)
    spent = sum(cpu_ns(pid) for pid in pids) - before
    return 100.0 * spent / ((time.monotonic() - started) * 1e9)


def settle(pids):
    """Seconds until the workers' CPU over 2 s fell below SETTLED_PCT (or SETTLE_MAX_S)."""
    started = time.monotonic()
    while cpu_pct(pids, 2.0) >= SETTLED_PCT and time.monotonic() - started < SETTLE_MAX_S:
        pass
    return time.monotonic() - started


def wait_for(what, ready, timeout_s, supervisor):
    deadline = time.monotonic() + timeout_s
    while not ready():
        if supervisor.poll() is not None:
            raise SystemExit(f"bench: the supervisor ended (exit {supervisor.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: no {what} within {timeout_s:.0f} s")
        time.sleep(0.2)


def run(supervisor_path, python):
    comfyctl = os.path.join(os.path.dirname(supervisor_path), "comfyctl")
    instance = f"bench-idle-{os.getpid()}"
    with tempfile.TemporaryDirectory(prefix="bench-idle-") as folder:
        path = os.path.join(folder, "config.json")
        with open(path, "w") as out:
            json.dump(config(python, folder), out)
        log = open(os.path.join(folder, "supervisor.log"), "w")
        supervisor = subprocess.Popen([supervisor_path, "run", "--config", path, "--instance", instance],
                                      stdout=log, stderr=subprocess.STDOUT)
        try:
            def all_ready():
                rows = [w for w in workers(comfyctl, instance) if w.get("name", "").startswith("idle")]
                return len(rows) == WORKERS and all(w.get("state") == "ready" for w in rows)
            wait_for("ready pack workers", all_ready, 600, supervisor)
            wait_for("filler", lambda: os.path.exists(os.path.join(folder, "joined")), 60, supervisor)
            pids = [w["pid"] for w in workers(comfyctl, instance) if w["name"].startswith("idle")]
            figures = {"settle_empty_s": settle(pids)}
            figures["idle_cpu_empty_ledger_pct"] = cpu_pct(pids, WINDOW_S)
            with open(os.path.join(folder, "fill"), "w") as out:
                json.dump({"models": MODELS}, out)
            wait_for("full ledger", lambda: os.path.exists(os.path.join(folder, "filled")), 900, supervisor)
            with open(os.path.join(folder, "filled")) as source:
                filled = json.load(source)
            figures["settle_1m_s"] = settle(pids)
            figures["idle_cpu_1m_ledger_pct"] = cpu_pct(pids, WINDOW_S)
            figures["ledger_rows"] = filled["rows"]
            figures["ledger_read_1m_ms"] = filled["ledger_read_ms"]
            figures["ledger_look_unchanged_us"] = filled["ledger_look_unchanged_us"]
            figures["window_s"] = WINDOW_S
            figures["workers"] = WORKERS
            return figures
        finally:
            supervisor.terminate()
            try:
                supervisor.wait(timeout=60)
            except subprocess.TimeoutExpired:
                supervisor.kill()
                supervisor.wait()
            log.close()


def main():
    supervisor, python, as_json = sys.argv[1], sys.argv[2], "--json" in sys.argv[3:]
    figures = run(supervisor, python)
    figures["targets_met"] = {"idle_cpu_1m_ledger_under_1_pct": figures["idle_cpu_1m_ledger_pct"] < 1.0,
                              "idle_cpu_empty_ledger_under_0_5_pct": figures["idle_cpu_empty_ledger_pct"] < 0.5}
    if as_json:
        print(json.dumps(figures))
        return
    print(f"{WORKERS} idle pack workers, CPU over {WINDOW_S:.0f} s, in percent of one CPU:")
    print(f"  empty ledger:           {figures['idle_cpu_empty_ledger_pct']:.3f} % (target < 0.5)")
    print(f"  {figures['ledger_rows']} ledger rows: {figures['idle_cpu_1m_ledger_pct']:.3f} % (target < 1)")
    print(f"  one read of that ledger by a participant: {figures['ledger_read_1m_ms']:.1f} ms (what every look, every "
          f"{REFRESH_S} s, cost when every look read it); a look while it stands still: "
          f"{figures['ledger_look_unchanged_us']:.2f} us")


if __name__ == "__main__":
    main()
