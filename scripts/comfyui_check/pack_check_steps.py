"""Step 37 (--real-packs DIR): `comfyctl pack check`'s estimate (python3 -m
comfy_supervisor.environments check DIR --json, run with the check's interpreter) against
what ran, for each real pack of steps 24-31 and for tests/packs/v3_pack (step 17), which the
fake ComfyUI of CTest's pack check cannot import.

- The classes the estimate registers for sure are the ones the pack registers when
  ComfyUI imports it: its one-process copy's nodes in GET /object_info (their python_module
  its copy's folder), less their prefix (v3_pack's: the isolated pack's, its python_module
  custom_nodes.v3_pack). A class the
  estimate finds only under a condition (rgthree's behind a config value) may be either.
- Every class a real pack's step ran isolated bit-equal to one process (the isolated
  classes of its prompts, where its step passed) is estimated "crosses".

Runs while ComfyUI still serves, after the real packs' steps."""

import json
import os
import pathlib
import subprocess

from real_pack_steps import PACKS
from v3_steps import V3_ONE_PROCESS, V3_PACK

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "worker" / "python"
PACK_CHECK_STEP = 37
TITLE = ("comfyctl pack check's estimate finds the classes each real pack registers, and every class run isolated "
         "bit-equal crosses")


def steps(check):
    return [(PACK_CHECK_STEP, TITLE)] if check.real_packs.folder else []


def estimate(check, folder):
    """The pack's estimate as JSON, or None and why."""
    done = subprocess.run([check.python, "-m", "comfy_supervisor.environments", "check", folder, "--json"],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(PACKAGE), PYTHONDONTWRITEBYTECODE="1"))
    if done.returncode != 0:
        return None, f"pack check answered {done.returncode}: {done.stderr.strip()[:200]}"
    return json.loads(done.stdout), None


def compare(label, found, registered, ran):
    """(ok, what was seen) for one pack: its names, and the verdicts of the classes `ran`."""
    sure = {node["name"] for node in found["nodes"]}
    maybe = {node["name"] for node in found["maybe_nodes"]}
    verdicts = {node["name"]: node for node in found["nodes"] + found["maybe_nodes"]}
    names_ok = sure <= registered <= sure | maybe
    seen = [f"{label}: {len(sure)} classes estimated" + (f" (+{len(maybe)} conditional)" if maybe else "")
            + f", {len(registered)} registered"]
    if not names_ok:
        seen.append(f"only estimated {sorted(sure - registered)[:8]}, only registered {sorted(registered - sure)[:8]}")
    wrong = [f"{name}: {verdicts[name]['verdict'] if name in verdicts else 'not found'}"
             + (f" ({'; '.join(verdicts[name]['reasons'])[:200]})" if name in verdicts else "")
             for name in sorted(ran) if verdicts.get(name, {}).get("verdict") != "crosses"]
    if ran:
        seen.append(f"{len(ran) - len(wrong)} of {len(ran)} classes run isolated estimated to cross"
                    + (f"; not: {wrong}" if wrong else ""))
    return names_ok and not wrong, "; ".join(seen)


def step(check):
    if not check.real_packs.folder:
        return
    status, raw = check.http("GET", "/object_info", timeout=120)
    if status != 200:
        check.step(PACK_CHECK_STEP, TITLE, False, f"GET /object_info answered {status}")
        return
    info = json.loads(raw)
    results = []
    for pack in PACKS:
        folder = check.real_packs.ready.get(pack.key)
        if folder is None:
            results.append((False, f"{pack.key}: not run ({check.real_packs.problems.get(pack.key, 'not ready')})"))
            continue
        found, why = estimate(check, folder)
        if found is None:
            results.append((False, f"{pack.key}: {why}"))
            continue
        # Its one-process copy's nodes (another copy's may share the prefix: OneProcess + NoiseLatent).
        copy = f"custom_nodes.comfyui_check_real_{pack.key}"
        registered = {name[len(pack.prefix):] for name, node in info.items()
                      if name.startswith(pack.prefix) and node.get("python_module") == copy}
        isolated = {name for name, node in info.items() if node.get("python_module") == f"custom_nodes.{pack.folder}"}
        classes, passed = check.real_packs.ran.get(pack.key, (set(), False))
        ok, seen = compare(pack.key, found, registered, classes & isolated if passed else set())
        results.append((ok, seen + ("" if passed else " (its step did not pass: verdicts not compared)")))
    found, why = estimate(check, str(V3_PACK))
    if found is None:
        results.append((False, f"v3_pack: {why}"))
    else:
        registered = {name for name, node in info.items() if node.get("python_module") == "custom_nodes.v3_pack"
                      and V3_ONE_PROCESS + name in info}
        results.append(compare("v3_pack", found, registered, set()))
    check.step(PACK_CHECK_STEP, TITLE, all(ok for ok, _ in results), "; ".join(seen for _, seen in results))
