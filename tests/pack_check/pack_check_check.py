"""`comfyctl pack check` (python3 -m comfy_supervisor.environments check) over every test pack
of tests/packs, against what runs there: each pack imported in a child over the fake ComfyUI,
as its worker imports it (registered.py), and how the packs behave isolated, as the other
tests show it.

- The classes the estimate registers for sure are among those the import registers, and
  those are among the sure and the conditional ones together (a pack that does not import
  here, as broken_pack, only gets no crash and a line naming what it lacks).
- group_maker makes SHARED_THING and group_taker takes it: the estimate says so, the two
  packs must be grouped (test_host_processes runs them as one group).
- routes_pack's nodes cross, and its websocket route keeps it in ComfyUI's process (the
  host refuses the route with 501: route_checks.py).
- bad_interface_pack's ListInputs and NumberReturns do not cross (the host leaves them out),
  one_bad_class_pack's ListsMissingFolder is unknown (its INPUT_TYPES() raises).
- Every other node of the test packs crosses, the hostile packs' included: what they do is
  at run time, and the host survives it isolated.
- The pack is read, never run: a pack written here whose import would write a file, loop
  forever or recurse without end is read to the end and writes nothing.
- The command: the text's first line says it is an estimate; a folder that is not a pack is
  refused with status 2 and one line.

    python3 pack_check_check.py PACKAGE_DIR FAKE_COMFYUI PACKS_DIR
"""

import json
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host"))
from check_report import CheckReport  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# How the test packs' nodes behave isolated, where a node does not simply cross.
NOT_CROSSING = {("bad_interface_pack", "ListInputs"): "does not cross",
                ("bad_interface_pack", "NumberReturns"): "does not cross",
                ("one_bad_class_pack", "ListsMissingFolder"): "unknown"}
# Packs whose import needs what this fake ComfyUI lacks: compared by scripts/comfyui-check (step 36).
NEEDS_REAL_COMFYUI = {"v3_pack": "comfy_api"}


def run_check(package, folder, *extra):
    return subprocess.run([sys.executable, "-m", "comfy_supervisor.environments", "check", folder, *extra],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=package))


def estimate_of(package, folder):
    done = run_check(package, folder, "--json")
    if done.returncode != 0:
        return None, f"status {done.returncode}: {done.stderr.strip()[:300]}"
    return json.loads(done.stdout), None


def registered(package, comfyui, folder, scratch):
    """What the pack registers when imported as its worker imports it: (names or None, why)."""
    name = os.path.basename(folder)
    env = dict(os.environ, PYTHONPATH=package, PYTHONDONTWRITEBYTECODE="1")
    args = []
    pid_file = os.path.join(scratch, f"{name}.pid")
    if name == "lingering_pack":
        env["LINGERING_PACK_PID"] = pid_file
    if name == "startup_pack":  # as tests/python/pack_worker_test.cpp gives it ComfyUI's flags
        models, output = os.path.join(scratch, "models"), os.path.join(scratch, "output")
        extra = os.path.join(scratch, "extra_model_paths.yaml")
        with open(extra, "w", encoding="utf-8") as text:
            text.write(f"checkpoints: {models}\n")
        env.update(STARTUP_PACK_MODELS=models, STARTUP_PACK_OUTPUT=output)
        args = ["--", "--extra-model-paths-config", extra, "--output-directory", output]
    # Into files, not pipes: lingering_pack's helper keeps what it inherited open.
    out_path = os.path.join(scratch, f"{name}.out")
    try:
        with open(out_path, "w+", encoding="utf-8") as out:
            done = subprocess.run([sys.executable, os.path.join(HERE, "registered.py"), folder, comfyui, *args],
                                  stdout=out, stderr=subprocess.STDOUT, text=True, timeout=120, env=env,
                                  stdin=subprocess.DEVNULL)
            out.seek(0)
            output = out.read()
    finally:
        if os.path.exists(pid_file):  # the helper lingering_pack starts at import, in a session of its own
            with open(pid_file, encoding="utf-8") as text:
                try:
                    os.kill(int(text.read().strip()), signal.SIGKILL)
                except (ValueError, ProcessLookupError):
                    pass
    lines = [line for line in output.splitlines() if line.startswith("{")]
    if not lines:
        return None, f"the import printed nothing (status {done.returncode}): {output.strip()[-300:]}"
    answer = json.loads(lines[-1])
    return answer.get("names"), answer.get("error")


def compare_names(report, pack, found, names, why):
    sure = {node["name"] for node in found["nodes"]}
    maybe = {node["name"] for node in found["maybe_nodes"]}
    if pack in NEEDS_REAL_COMFYUI:
        report.check(names is None and sure, f"{pack}: {len(sure)} classes estimated; its import needs "
                                             f"{NEEDS_REAL_COMFYUI[pack]}, which the fake ComfyUI lacks ({why})")
        return
    if names is None:
        report.check(not sure and not found["errors"] and any("some_dependency_not_installed" in n
                                                              for n in found["notes"]),
                     f"{pack}: does not import here ({why}); the estimate finds no class and names the missing "
                     f"module: {found['notes']}")
        return
    report.check(sure <= set(names) <= sure | maybe,
                 f"{pack}: the estimate's classes {sorted(sure)} (+ conditional {sorted(maybe)}) match those its "
                 f"import registers {names}")


def compare_verdicts(report, pack, found):
    wrong = [f"{node['name']}: {node['verdict']} ({'; '.join(node['reasons'])})" for node in found["nodes"]
             if node["verdict"] != NOT_CROSSING.get((pack, node["name"]), "crosses")]
    report.check(not wrong, f"{pack}: each node's verdict is how it behaves isolated" +
                 (f"; differ: {wrong}" if wrong else ""))


def check_groups_and_routes(report, estimates):
    made = estimates.get("group_maker", {}).get("types_made")
    taken = estimates.get("group_taker", {}).get("types_taken")
    report.check(made == ["SHARED_THING"] and taken == ["SHARED_THING"],
                 f"group_maker makes SHARED_THING ({made}) and group_taker takes it ({taken}): a type one pack "
                 "makes and another takes, so group them")
    kept = estimates.get("routes_pack", {}).get("keep_in_host", [])
    report.check(any("websocket" in line for line in kept),
                 f"routes_pack's websocket route keeps it in ComfyUI's process: {kept}")
    others = [name for name, found in estimates.items() if found["keep_in_host"] and name != "routes_pack"]
    report.check(not others, f"no other test pack is kept in ComfyUI's process ({others})")


HOSTILE_INIT = '''import os
open(os.path.join(os.path.dirname(__file__), "ran"), "w").close()
while True:
    pass
def forever(n):
    return forever(n + 1)
LIMIT = forever(0)
NODE_CLASS_MAPPINGS = {}
for i in range(3):
    NODE_CLASS_MAPPINGS[f"Node{i}"] = Node
class Node:
    RETURN_TYPES = ("IMAGE",)
'''


def check_never_runs(report, package, scratch):
    folder = os.path.join(scratch, "runs_at_import")
    os.makedirs(folder)
    with open(os.path.join(folder, "__init__.py"), "w", encoding="utf-8") as text:
        text.write(HOSTILE_INIT)
    done = run_check(package, folder)
    report.check(done.returncode == 0 and not os.path.exists(os.path.join(folder, "ran")),
                 f"a pack whose import writes a file, loops and recurses is read, never run (status "
                 f"{done.returncode}, {done.stderr.strip()[:200] or 'no error'})")
    report.check(done.stdout.splitlines()[:1] == ["pack check runs_at_import: an estimate from reading the pack's "
                                                  "source (it was not imported or run)"],
                 f"the text's first line says it is an estimate: {done.stdout.splitlines()[:1]}")
    refused = run_check(package, scratch)
    report.check(refused.returncode == 2 and refused.stdout == "" and len(refused.stderr.splitlines()) == 1
                 and "is not a custom node pack's folder" in refused.stderr,
                 f"a folder that is not a pack: status {refused.returncode}, {refused.stderr.strip()}")


def main():
    package, comfyui, packs = (os.path.abspath(a) for a in sys.argv[1:4])
    report = CheckReport("pack-check")
    estimates = {}
    with tempfile.TemporaryDirectory(prefix="pack-check-") as scratch:
        for pack in sorted(os.listdir(packs)):
            folder = os.path.join(packs, pack)
            if not os.path.isfile(os.path.join(folder, "__init__.py")):
                continue
            found, why = estimate_of(package, folder)
            report.check(found is not None, f"{pack}: pack check reads it ({why or 'status 0'})")
            if found is None:
                continue
            estimates[pack] = found
            compare_names(report, pack, found, *registered(package, comfyui, folder, scratch))
            compare_verdicts(report, pack, found)
        check_groups_and_routes(report, estimates)
        check_never_runs(report, package, scratch)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
