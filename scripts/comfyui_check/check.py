"""comfyui-check: comfy-supervisor under a real ComfyUI checkout, on the CPU, step by step.

Run by scripts/comfyui-check (which checks the interpreter and builds first), with the
interpreter that runs ComfyUI:

    PY scripts/comfyui_check/check.py --comfyui DIR --build BUILD [--keep]

It starts comfy-supervisor with a config made on the spot in a temporary folder:

- device: simulated, DEVICE_TOTAL bytes (2 GiB);
- comfyui: `PY main.py --cpu` in DIR, with --base-directory pointing at the temporary
  folder, so custom nodes, models, input, output, temp and user folders are all there and
  the checkout is not written to (PYTHONDONTWRITEBYTECODE, an in-memory database, a
  one-file front end). Its custom_nodes folder holds the project's custom node (a symlink
  to worker/python/comfyui_custom_node, as the README says to install it),
  model_node/ (a node that loads a torch model of a known size through
  comfy.model_management.load_models_gpu), tiny_models/ (a MODEL, CLIP, VAE, CONTROL_NET
  and CLIP_VISION made from a seed with ComfyUI's own classes, and an output node that
  shows the SHA-256 of tensors) and two copies of one_process/:
  comfyui_check_one_process/ (tests/packs/model_pack imported into ComfyUI's own process,
  its nodes named "OneProcess" + name) and bridge_pack/ (tests/packs/bridge_pack so
  imported, under the pack's own folder name, its nodes named "OneProcessBridge" + name).
  Third-party modules the interpreter lacks (safetensors, transformers, ...) are stubbed
  in the temporary folder (support.py), only as far as main.py needs to start; nothing of
  ComfyUI's own is stubbed;
- packs: "worker", the reference worker comfy-worker, whose node "load" loads a
  WORKER_MODEL model; "bridge", the test pack tests/packs/bridge_pack in a worker of its
  own (the config's `python` form: PY, the checkout's comfy package, --cpu); "model",
  "routes" and "v3", the test packs tests/packs/model_pack, routes_pack and v3_pack, the
  same way; "group", the test packs group_maker and group_taker as one group in one
  worker; and "clock",
  a comfy-worker whose node "hold" computes for an hour
  so that the workload (and so the supervisor) keeps running while the check looks. The
  workload starts once every participant is up, and the clock's process waits for a gate
  file before it execs comfy-worker: the check opens the gate after step 1, so the
  worker's load comes after ComfyUI's.

The steps, each checked against `comfyctl --instance NAME ledger --json`, each printed as
one PASS or FAIL line with what was seen:

1. A prompt POSTed to ComfyUI's /prompt runs the model node: a HOST_MODEL model loaded by
   upstream's load_models_gpu. The ledger must show the host's model, its name (its
   module's class), its size and its
   loaded bytes.
2. The gate opens; the worker loads WORKER_MODEL. Upstream's arithmetic wants
   1.1 x 640 MiB + 0.8 GiB + 400 MiB = 1923.2 MiB free: that fits the 2048 MiB device
   alone, not beside the host's 256 MiB (1792 MiB free), so the supervisor must ask the
   host to free 131.2 MiB. The ledger must show the host's model gone or partially
   unloaded and the worker's model loaded. This needs the integration to charge the
   host's loaded bytes on the simulated device, treating ComfyUI's torch device (the CPU
   under --cpu) as the supervised device; without that the worker's load fits beside the
   host's model and nothing is asked of the host.
3. POST /free {"unload_models": true} to ComfyUI: upstream's unload_all_models() must
   reach the worker's model through a stand-in entry in current_loaded_models, and the
   worker's model must leave the ledger.
4.-5. A pack's node and its front end (bridge_steps.py): a prompt runs the bridge pack's
   InvertImage in its worker, the image crossing both ways; ComfyUI serves the pack's
   front end, and the browser gets the message its node sent.
6.-13. Remote objects (remote_steps.py): each one prompt holding a graph with a node of
   the model pack run in its worker and the same graph with its one-process copy, over
   the same host objects; each output's SHA-256 must be equal (bit-equal tensors), and
   differ from the graph without the pack's node where the node changes the samples:
   6. PatchModel clones the host's MODEL, adds an object patch (its own sampling
      schedule), its attention patch and CFG function; the host's KSampler samples.
   7. EncodeText encodes with the host's CLIP; VaeRoundTrip encodes and decodes with the
      host's VAE.
   8. ApplyControl applies the host's CONTROL_NET to CONDITIONING; the host samples.
   9. MirrorForward reads `model.model.diffusion_model` of the host's MODEL and runs it
      with torch: in the worker that is a mirror (docs/PACKS.md, "Mirrors"), upstream's
      UNetModel built by upstream's class and comfy.ops.pick_operations over the host's
      weights mapped from a sealed memfd; the forward's output must be bit-equal to the
      one-process node's over the module itself; a second pair reads the module by name,
      `model.get_model_object("diffusion_model")` (by_name), as many packs do: bit-equal
      to one process too, and to the first pair; and the ledger must hold the UNet's
      model once, the host's (the host samples with it in the same prompt), and nothing
      of pack model's (a mirror registers nothing).
   10. LoadModel loads the pack's own MODEL (a checkpoint of the tiny UNet) and the
      host's KSampler samples with it; the ledger must show a model of the UNet's size
      owned by pack model, named after the checkpoint's file.
   11. MirrorClipVision reads `clip_vision.model` of the host's CLIP_VISION (upstream's
      ClipVisionModel over a tiny configuration, a node of tiny_models/ of its own) and
      runs it on a seeded image as upstream's encode_image does: in the worker that is a
      mirror too, upstream's CLIPVisionModelProjection built from the configuration the
      host's model was built from, over the host's weights; the penultimate layer's
      output must be bit-equal to the one-process node's.
   12. ReplaceAttention changes the host MODEL's model_options in place on its clone, as
      IPAdapter's set_model_patch_replace does (its attention replacement under
      patches_replace["attn2"] for the middle block's transformer, then a second scale
      added to the replacement found there); the host's KSampler samples, calling the
      replacement from upstream's BasicTransformerBlock.
   13. NoiseLatent asks the host's NOISE, upstream's RandomNoise's Noise_RandomNoise, for a
      latent's noise (generate_noise: upstream's prepare_noise in the host) and reads its
      seed, which must be RandomNoise's noise_seed.
14.-15. Node info and wildcard sockets (bridge_steps.py): an isolated node's /object_info
   entry and the prompt saved in its images equal one process's; a wildcard socket passes
   ComfyUI's validation as in one process.
16. A pack's HTTP routes (route_steps.py, tests/packs/routes_pack as "routes"): ComfyUI's
   server answers them as the pack's handlers make them, in its worker, also while the
   pack's node runs.
17. A pack of ComfyUI's newer node API (v3_steps.py, tests/packs/v3_pack as "v3"): its
   io.ComfyNode classes, given by comfy_entrypoint, run isolated as upstream runs them.
18. A pack group (group_steps.py): an object one pack's node makes goes into another
   pack's node as it is, the two packs run as one group in one worker.
19. The supervisor is stopped with SIGTERM: it must shut down cleanly (exit status 0, or 1
   when its one failed prompt is the clock's, which the shutdown cuts short), and no
   participant process and no /dev/shm segment may be left.
20. Upstream's own free_memory, from the checkout, over stand-in entries on 1,000 random
   machines must leave every model as the same call in one process does
   (tests/host/standin_equivalence.py; no supervisor: the owners' unloads are direct).
21. The bridge pack is isolated by `comfyctl pack add` before the start (environment_steps.py):
   its environment built over ComfyUI's interpreter, its import checked against the
   checkout, the config's entry rewritten; its worker must run that environment's
   interpreter, and its node must have run there in step 4.

24.-31. With --real-packs DIR (real_pack_steps.py): public packs at fixed commits, each
   isolated in a worker of its own and imported into ComfyUI's process, their outputs over
   the tiny models bit-equal, and changed by the pack's nodes.

34. HostClip encodes with the host's CLIP (remote_steps.py), which the pack gets as its
   replica: upstream's SD1 CLIP built in the worker over the host's text encoder mapped;
   and on a clone with a weight patch of the pack's: each bit-equal to one process, the
   patch changing the conditioning, and no line of the worker saying the CLIP crossed as a
   proxy.

35. HostVae and HostClipVision (remote_steps.py) encode and decode with the host's SD1 VAE
   (tiny_models/sd_vae.py: upstream's VAE given a checkpoint's VAE weights), plain and
   tiled, and encode an image with the host's CLIP_VISION, which the pack gets as replicas
   (upstream's VAE and ClipVisionModel built in the worker over the host's weights mapped):
   each bit-equal to one process, and no line of the worker saying either crossed as a
   proxy.

36. With --real-packs DIR (adopt_steps.py): `comfyctl adopt`, offline, over a ComfyUI made in
   the temporary folder whose custom_nodes holds the real packs: a line per pack of what it
   decided and why, check OK, and ComfyUI under the adopted config registering the node
   classes ComfyUI alone registers with every pack, but those the report names.

37. With --real-packs DIR (pack_check_steps.py): `comfyctl pack check`'s estimate of each real
   pack (and of tests/packs/v3_pack) finds the classes ComfyUI registers when it imports the
   pack, and estimates every class steps 24-31 ran isolated bit-equal as crossing.

Then one line `comfyui-check: N passed, M failed`; the exit status is 1 on any failure.
Every process and the segment are cleaned up on exit, Ctrl-C and SIGTERM included.
"""

import argparse
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import adopt_steps
import bridge_steps
import environment_steps
import group_steps
import pack_check_steps
import real_pack_steps
import remote_steps
import route_steps
import v3_steps
from bridge_steps import BRIDGE_ONE_PROCESS, BRIDGE_PACK, NODE_INFO_STEP, WILDCARD_STEP
from route_steps import ROUTES_PACK, ROUTES_STEP
from v3_steps import V3_PACK, V3_STEP
from group_steps import GROUP_STEP
from support import PROMPT_TIMEOUT_S, MiB, alive, comfyui_version, free_port, mib, write_json, write_stubs

GiB = 1024 * MiB
DEVICE_TOTAL = 2 * GiB
HOST_MODEL_MIB = 256
HOST_MODEL_CLASS = "Sequential"  # the model node's module (model_node), the name the ledger must show
WORKER_MODEL_MIB = 640
RESERVE = 400 * MiB  # the supervisor's memory.reserve_bytes default, upstream's EXTRA_RESERVED_VRAM

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
MODEL_PACK = REPO / "tests" / "packs" / "model_pack"

STARTUP_TIMEOUT_S = 600
LEDGER_TIMEOUT_S = 60
FREE_TIMEOUT_S = 20
SHUTDOWN_STEP = 19
EQUIVALENCE_STEP = 20


class Interrupted(Exception):
    pass


def admission_target(weights, largest_tensor=0):
    """Upstream's load_models_gpu target: weights x 1.1 + max(0.8 GiB + reserve, largest + reserve)."""
    return weights * 1.1 + max(GiB * 0.8 + RESERVE, largest_tensor + RESERVE)


class Check:
    def __init__(self, options):
        self.comfyui = pathlib.Path(options.comfyui).resolve()
        self.build = pathlib.Path(options.build).resolve()
        self.keep = options.keep
        self.python = sys.executable
        self.instance = f"comfyui-check-{os.getpid()}"
        self.segment = pathlib.Path("/dev/shm") / f"comfy-sv-{os.getuid()}-{self.instance}"
        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix="comfyui-check-"))
        self.gate = self.tmp / "gate"
        self.port = free_port()
        self.supervisor = None
        self.pids = set()  # every participant pid comfyctl showed
        self.results = []
        self.real_packs = real_pack_steps.RealPackSteps(self, options.real_packs)

    # ---- output ----

    def say(self, line):
        print(f"comfyui-check: {line}", flush=True)

    def step(self, number, title, ok, seen):
        self.results.append(ok)
        print(f"{'PASS' if ok else 'FAIL'} {number} {title}: {seen}", flush=True)

    # ---- the temporary folder ----

    def prepare(self):
        base = self.tmp / "base"
        nodes = base / "custom_nodes"
        nodes.mkdir(parents=True)
        (nodes / "comfy_supervisor").symlink_to(REPO / "worker" / "python" / "comfyui_custom_node")
        for folder in ("model_node", "tiny_models", "one_process"):
            shutil.copytree(HERE / folder, nodes / f"comfyui_check_{folder}")
        # Under the pack's own folder name, as a user installs it: upstream's python_module for its classes is then
        # custom_nodes.bridge_pack, what the isolated proxies must show (step 14).
        shutil.copytree(HERE / "one_process", nodes / BRIDGE_PACK.name)
        shutil.copytree(HERE / "one_process", nodes / V3_PACK.name)
        one_process = {"comfyui_check_one_process": [str(MODEL_PACK), "OneProcess"],
                       BRIDGE_PACK.name: [str(BRIDGE_PACK), BRIDGE_ONE_PROCESS],
                       V3_PACK.name: [str(V3_PACK), v3_steps.V3_ONE_PROCESS]}
        front = self.tmp / "frontend"
        front.mkdir()
        (front / "index.html").write_text("<!doctype html><title>comfyui-check</title>\n")
        stubs = self.tmp / "stubs"
        stubs.mkdir()
        stubbed = write_stubs(stubs)
        real_packs = self.real_packs.prepare(nodes, one_process, base, stubs)
        packs = self.tmp / "packs"
        packs.mkdir()
        write_json(packs / "worker.json",
                   {"nodes": {"load": [{"op": "load_model", "model": "big", "bytes": f"{WORKER_MODEL_MIB}MiB"}]}})
        write_json(packs / "clock.json", {"nodes": {"hold": [{"op": "compute", "ms": 3600000}]}})
        write_json(self.tmp / "workload.json",
                   {"prompts": [[{"pack": "worker", "node": "load"}, {"pack": "clock", "node": "hold"}]]})
        worker = str(self.build / "bin" / "comfy-worker")
        pythonpath = os.pathsep.join([str(stubs), str(REPO / "worker" / "python")])
        config = {
            "device": {"kind": "simulated", "total_bytes": f"{DEVICE_TOTAL // MiB}MiB"},
            # ComfyUI takes a while to start, and the clock waits at its gate until step 1 is done.
            "limits": {"handshake_timeout_ms": 600000, "heartbeat_timeout_ms": 20000, "shutdown_grace_ms": 3000},
            "comfyui": {
                "command": self.python,
                "checkout": str(self.comfyui),
                "args": ["main.py", "--cpu", "--listen", "127.0.0.1", "--port", str(self.port),
                         "--base-directory", str(base), "--front-end-root", str(front),
                         "--database-url", "sqlite:///:memory:", "--disable-api-nodes", "--disable-auto-launch"],
                "working_directory": str(self.comfyui),
                "env_allowlist": ["HOME", "PATH", "LANG"],
                "env": {"PYTHONPATH": pythonpath, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
                        "COMFYUI_CHECK_ONE_PROCESS_PACKS": json.dumps(one_process)},
                "restart": {"max_restarts": 0},
            },
            "packs": [
                {"name": "worker", "command": worker, "args": ["--pack", str(packs / "worker.json")],
                 "restart": {"max_restarts": 0}},
                {"name": "bridge",
                 "python": {"pack": str(BRIDGE_PACK), "interpreter": self.python,
                            "comfyui_args": ["--cpu"]},
                 "env": {"PYTHONPATH": str(stubs), "PYTHONDONTWRITEBYTECODE": "1"}, "restart": {"max_restarts": 0}},
                {"name": "model", "python": {"pack": str(MODEL_PACK), "interpreter": self.python, "comfyui_args": ["--cpu"]},
                 "env": {"PYTHONPATH": str(stubs), "PYTHONDONTWRITEBYTECODE": "1"}, "restart": {"max_restarts": 0}},
                {"name": "routes", "python": {"pack": str(ROUTES_PACK), "interpreter": self.python,
                                              "comfyui_args": ["--cpu"]},
                 "env": {"PYTHONPATH": str(stubs), "PYTHONDONTWRITEBYTECODE": "1"}, "restart": {"max_restarts": 0}},
                {"name": "v3", "python": {"pack": str(V3_PACK), "interpreter": self.python, "comfyui_args": ["--cpu"]},
                 "env": {"PYTHONPATH": str(stubs), "PYTHONDONTWRITEBYTECODE": "1"}, "restart": {"max_restarts": 0}},
                {"name": "group", "python": {"pack": [str(folder) for folder in group_steps.GROUP],
                                             "interpreter": self.python, "comfyui_args": ["--cpu"]},
                 "env": {"PYTHONPATH": str(stubs), "PYTHONDONTWRITEBYTECODE": "1"}, "restart": {"max_restarts": 0}},
                {"name": "clock", "command": "/bin/sh",
                 "args": ["-c", 'while [ ! -e "$0" ]; do sleep 0.2; done; exec "$1" --pack "$2"',
                          str(self.gate), worker, str(packs / "clock.json")],
                 "env_allowlist": ["PATH"], "restart": {"max_restarts": 0}},
                *real_packs,
            ],
        }
        write_json(self.tmp / "config.json", config)
        self.bridge_added = environment_steps.isolate(self, BRIDGE_PACK)
        return stubbed

    # ---- the processes ----

    def start(self, workload=True):
        """comfy-supervisor run over the folder's config.json, with its workload.json unless
        `workload` is False (it then runs until stopped)."""
        self.log = self.tmp / "supervisor.log"
        self.out = self.tmp / "supervisor.out"
        with open(self.log, "wb") as err, open(self.out, "wb") as out:
            # A session of its own: Ctrl-C reaches the check only, which stops the supervisor
            # with SIGTERM, its clean shutdown.
            workload_args = ["--workload", str(self.tmp / "workload.json")] if workload else []
            self.supervisor = subprocess.Popen(
                [str(self.build / "bin" / "comfy-supervisor"), "run", "--config", str(self.tmp / "config.json"),
                 *workload_args, "--instance", self.instance],
                stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)

    def ctl(self, what):
        run = subprocess.run([str(self.build / "bin" / "comfyctl"), "--instance", self.instance, what, "--json"],
                             capture_output=True, text=True, timeout=30)
        if run.returncode != 0:
            return None
        try:
            return json.loads(run.stdout)
        except ValueError:
            return None

    def workers(self):
        report = self.ctl("workers")
        rows = [w for w in (report or {}).get("workers", []) if w.get("status") == "ok"]
        for row in rows:
            if row.get("pid"):
                self.pids.add(row["pid"])
        return rows

    def ledger(self):
        report = self.ctl("ledger")
        return [row for row in (report or {}).get("ledger", []) if row.get("status") == "ok"]

    def device(self):
        return (self.ctl("census") or {}).get("device", {})

    def supervisor_alive(self):
        return self.supervisor is not None and self.supervisor.poll() is None

    def log_lines(self, needle):
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return []
        return [line for line in text.splitlines() if needle in line]

    def out_lines(self):
        try:
            return self.out.read_text(errors="replace").splitlines()
        except OSError:
            return []

    def log_tail(self, count=40):
        try:
            return self.log.read_text(errors="replace").splitlines()[-count:]
        except OSError:
            return []

    # ---- HTTP to ComfyUI ----

    def http(self, method, path, body=None, timeout=10):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                raw = response.read()
                return response.status, raw
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def comfyui_models(self):
        """ComfyUI's current_loaded_models, through the model node's route; None when unreadable."""
        try:
            status, raw = self.http("GET", "/comfyui_check/loaded_models", timeout=5)
            return json.loads(raw) if status == 200 else None
        except (OSError, ValueError):
            return None

    def describe_comfyui(self):
        entries = self.comfyui_models()
        if entries is None:
            return "ComfyUI's current_loaded_models unreadable"
        described = []
        for e in entries:
            if "error" in e:
                described.append(f"{e['class']} ({e['patcher']}) on {e['device']}: {e['error']}")
            elif "size" in e:
                described.append(f"{e['class']} {e.get('module')} {mib(e['loaded'])} of {mib(e['size'])} on {e['device']}")
            else:
                described.append(f"{e['class']} with a dead patcher on {e['device']}")
        return "ComfyUI's current_loaded_models: " + ("; ".join(described) if described else "empty")

    def wait_for(self, what, timeout_s, interval_s=0.25):
        """what() until it returns something true, the supervisor dies or time runs out."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = what()
            if value:
                return value
            if not self.supervisor_alive() or time.monotonic() > deadline:
                return value
            time.sleep(interval_s)

    # ---- waiting for ComfyUI ----

    def host_up(self, node="ComfySupervisorCheckModel"):
        """True once ComfyUI serves (`node`'s info); "failed" once the supervisor gave up on it;
        else None."""
        states = [w.get("state") for w in self.workers() if w.get("slot") == 0]
        if "failed" in states:
            return "failed"
        if not any(state in ("ready", "busy") for state in states):
            return None
        try:
            status, _ = self.http("GET", f"/object_info/{node}", timeout=5)
        except OSError:
            return None
        return status == 200

    # ---- the steps ----

    def host_rows(self, ledger):
        return [row for row in ledger if row.get("owner_slot") == 0]

    def worker_rows(self, ledger):
        return [row for row in ledger if row.get("owner") == "worker"]

    def describe(self, rows):
        return ", ".join(f"model {row['model_id']} \"{row.get('name', '')}\" {mib(row['loaded_bytes'] or 0)} of "
                         f"{mib(row['total_bytes'])} loaded" for row in rows) or "none"

    def step1(self):
        title = f"a prompt through ComfyUI's /prompt loads a {HOST_MODEL_MIB} MiB model"
        size = HOST_MODEL_MIB * MiB
        prompt = {"1": {"class_type": "ComfySupervisorCheckModel",
                        "inputs": {"megabytes": HOST_MODEL_MIB, "nonce": os.getpid()}}}
        prompt_id, entry, failure = self.run_prompt(prompt)
        if entry is None:
            self.step(1, title, False, failure)
            return False
        # Named by its class, as the host's integration names a model no file loader made.
        rows = self.wait_for(lambda: [r for r in self.host_rows(self.ledger()) if r["total_bytes"] == size
                                      and r["loaded_bytes"] == size and r.get("name") == HOST_MODEL_CLASS], 10)
        ledger = self.ledger()
        if rows:
            self.step(1, title, True, f"prompt {prompt_id} ran; ledger: host {self.describe(rows)}; "
                                      f"{self.describe_comfyui()}")
            return True
        self.step(1, title, False, f"prompt {prompt_id} ran; ledger: host {self.describe(self.host_rows(ledger))} "
                                   f"(expected \"{HOST_MODEL_CLASS}\" {mib(size)} of {mib(size)} loaded); "
                                   f"{self.describe_comfyui()}")
        return False

    def step2(self, host_ok):
        title = f"a worker's {WORKER_MODEL_MIB} MiB load evicts the host's model"
        size = WORKER_MODEL_MIB * MiB
        self.gate.touch()
        rows = self.wait_for(lambda: [r for r in self.worker_rows(self.ledger()) if r["loaded_bytes"] == size],
                             LEDGER_TIMEOUT_S)
        if not rows:
            self.step(2, title, False, f"the worker's model did not reach the ledger within {LEDGER_TIMEOUT_S} s; "
                                       f"log: {' | '.join(self.log_lines('worker')[-3:])}")
            return False
        host_size = HOST_MODEL_MIB * MiB
        # The host's answer (and its residency report) comes before the grant; give the
        # report a moment to land all the same.
        self.wait_for(lambda: all((r["loaded_bytes"] or 0) < host_size for r in self.host_rows(self.ledger())), 3)
        ledger = self.ledger()
        host = self.host_rows(ledger)
        device = self.device()
        asked = [line.split("memory: ", 1)[1] for line in self.log_lines("asking host (slot 0")]
        evicted = host_ok and all((r["loaded_bytes"] or 0) < host_size for r in host)
        used = device.get("used_bytes", 0)
        held = sum(r["loaded_bytes"] or 0 for r in ledger)
        seen = (f"ledger: worker {self.describe(self.worker_rows(ledger))}, host {self.describe(host) if host else 'model gone'}; "
                f"device {mib(used)} used of {mib(device.get('total_bytes', 0))}")
        if used < held:
            seen += f" (the ledger's {mib(held)} are not all charged on the simulated device)"
        seen += f"; {self.describe_comfyui()}; "
        seen += f"supervisor: {asked[0]}" if asked else "the supervisor asked the host (slot 0) nothing"
        if not host_ok:
            seen += " (step 1 failed: no host model to evict)"
        self.step(2, title, evicted, seen)
        return True

    def step3(self, worker_loaded):
        title = "POST /free {\"unload_models\": true} unloads the worker's model through a stand-in"
        before = len(self.log_lines("comfy-supervisor ["))
        status, raw = self.http("POST", "/free", {"unload_models": True})
        if status != 200:
            self.step(3, title, False, f"POST /free answered {status}: {raw.decode(errors='replace')[:300]}")
            return
        if not worker_loaded:
            self.step(3, title, False, "no worker model in the ledger to unload (step 2 failed)")
            return
        gone = self.wait_for(lambda: not self.worker_rows(self.ledger()), FREE_TIMEOUT_S, 0.5)
        ledger = self.ledger()
        # What the supervisor logged about the worker or memory since the POST.
        asked = [line.split("] ", 1)[1] for line in self.log_lines("comfy-supervisor [")[before:]
                 if "memory:" in line or "worker" in line]
        if gone:
            seen = f"the worker's model left the ledger; host {self.describe(self.host_rows(ledger))}; "
        else:
            seen = (f"{FREE_TIMEOUT_S} s after POST /free the ledger still has worker "
                    f"{self.describe(self.worker_rows(ledger))} and host {self.describe(self.host_rows(ledger))}; ")
        seen += f"{self.describe_comfyui()}; "
        seen += f"supervisor: {asked[0]}" if asked else "the supervisor logged nothing about the worker or memory"
        self.step(3, title, bool(gone), seen)

    def run_prompt(self, prompt):
        """POSTs `prompt` and waits for its end: (its id, its history entry, None) when it
        succeeded, else (its id or None, None, why)."""
        status, raw = self.http("POST", "/prompt", {"prompt": prompt, "client_id": "comfyui-check"})
        if status != 200:
            return None, None, f"POST /prompt answered {status}: {raw.decode(errors='replace')[:300]}"
        prompt_id = json.loads(raw)["prompt_id"]

        def finished():
            status, raw = self.http("GET", f"/history/{prompt_id}")
            entry = json.loads(raw).get(prompt_id) if status == 200 else None
            return entry and entry.get("status", {}).get("completed") is not None and entry
        entry = self.wait_for(finished, PROMPT_TIMEOUT_S, 0.5)
        if not entry:
            return prompt_id, None, f"prompt {prompt_id} did not finish within {PROMPT_TIMEOUT_S} s"
        run = entry["status"]
        if run.get("status_str") != "success":
            errors = [m for m in run.get("messages", []) if m and m[0] == "execution_error"]
            detail = errors[0][1].get("exception_message", "").strip() if errors else run.get("status_str")
            return prompt_id, None, f"prompt {prompt_id} failed: {detail}"
        return prompt_id, entry, None

    def shutdown(self):
        title = "SIGTERM stops the supervisor; no process and no segment left"
        self.workers()  # the last pids
        status = self.stop()
        left = [pid for pid in sorted(self.pids) if alive(pid)]
        segment_left = self.segment.exists()
        # The clock's hour-long node is cut short by the shutdown, and the supervisor exits 1
        # for a workload with a failed prompt: that one failure is expected.
        cut = self.log_lines("node hold could not run: the supervisor is shutting down")
        failed = [line for line in self.out_lines() if "prompts run" in line]
        clean = status == 0 or (status == 1 and cut and failed and "(1 failed)" in failed[-1])
        seen = f"supervisor exit status {status}"
        if status == 1 and clean:
            seen += " (its one failed prompt is the clock's, cut short by the shutdown)"
        seen += f"; processes left: {left}" if left else "; no participant process left"
        seen += f"; {self.segment} left" if segment_left else f"; {self.segment} removed"
        shutdown = self.log_lines("segment removed") or self.log_lines("stopped")
        if shutdown:
            seen += f" (log: {shutdown[-1].split('] ', 1)[-1]})"
        self.step(SHUTDOWN_STEP, title, bool(clean) and not left and not segment_left, seen)

    # ---- stopping and cleaning ----

    def stop(self, grace_s=30):
        """SIGTERM, a grace period, then SIGKILL of the supervisor; its exit status."""
        if self.supervisor is None:
            return None
        if self.supervisor.poll() is None:
            self.supervisor.send_signal(signal.SIGTERM)
            try:
                self.supervisor.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.supervisor.kill()
                self.supervisor.wait()
        return self.supervisor.returncode

    def stop_all(self):
        """Stops the supervisor, then whatever outlived it, and removes the segment if it stayed."""
        self.stop()
        # The workers die with the supervisor (PR_SET_PDEATHSIG); whatever outlived it is ours.
        deadline = time.monotonic() + 5
        while any(alive(pid) for pid in self.pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in self.pids:
            if alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        try:
            self.segment.unlink()
        except FileNotFoundError:
            pass

    def remove_folder(self):
        if self.keep:
            self.say(f"kept {self.tmp} (config, logs, stubs)")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- the run ----

    def run(self, torch_version):
        stubbed = self.prepare()
        self.say(f"ComfyUI {comfyui_version(self.comfyui)} in {self.comfyui}, {self.python} "
                 f"(Python {sys.version.split()[0]}, torch {torch_version})")
        if stubbed:
            self.say("stubbed (not installed): " + ", ".join(stubbed))
        if self.real_packs.describe():
            self.say(self.real_packs.describe())
        target = admission_target(WORKER_MODEL_MIB * MiB, WORKER_MODEL_MIB * MiB // 8)
        self.say(f"simulated device {mib(DEVICE_TOTAL)}; host model {HOST_MODEL_MIB} MiB; worker model "
                 f"{WORKER_MODEL_MIB} MiB needs {mib(target)} free: it fits alone, not beside the host's model")
        self.start()
        up = self.wait_for(self.host_up, STARTUP_TIMEOUT_S, 0.5)
        if up is not True:
            why = ("the supervisor exited with status " + str(self.supervisor.returncode)) if not self.supervisor_alive() \
                else "ComfyUI failed to start (its output is in the log below)" if up == "failed" \
                else f"ComfyUI did not join and serve within {STARTUP_TIMEOUT_S} s"
            for number, title in ((1, "ComfyUI's prompt"), (2, "the worker's load"), (3, "POST /free"),
                                  (4, "a node in its pack's worker"), (5, "a pack's front end and messages"),
                                  *[(n, t) for n, t, _ in remote_steps.STEPS],
                                  (NODE_INFO_STEP, "an isolated node's node info and saved prompt"),
                                  (WILDCARD_STEP, "wildcard sockets"), (ROUTES_STEP, route_steps.TITLE),
                                  (V3_STEP, v3_steps.TITLE), (GROUP_STEP, "a pack group"),
                                  (environment_steps.ENVIRONMENT_STEP, environment_steps.TITLE),
                                  *self.real_packs.steps(), *pack_check_steps.steps(self)):
                self.step(number, title, False, f"not run: {why}")
            self.shutdown()
            self.standin_equivalence()  # needs no supervisor
            adopt_steps.step(self)  # nor this one's
            return
        host = [w for w in self.workers() if w.get("slot") == 0][0]
        self.say(f"ComfyUI is the host participant (pid {host['pid']}, generation {host['generation']}), "
                 f"serving http://127.0.0.1:{self.port}")
        host_ok = self.step1()
        worker_loaded = self.step2(host_ok)
        self.step3(worker_loaded)
        bridge = bridge_steps.BridgeSteps(self)
        ran_before = len(self.results)
        bridge.run_node_and_front_end()
        environment_steps.step(self, self.bridge_added, self.results[ran_before:ran_before + 1] == [True])
        remote_steps.RemoteSteps(self).run()
        bridge.run_node_info_and_wildcards()
        route_steps.step_routes(self)
        v3_steps.step_v3(self)
        group_steps.GroupSteps(self).run()
        self.real_packs.run()
        pack_check_steps.step(self)
        self.shutdown()
        self.standin_equivalence()
        adopt_steps.step(self)

    def standin_equivalence(self):
        run = subprocess.run([self.python, str(REPO / "tests" / "host" / "standin_equivalence.py"),
                              "--comfyui", str(self.comfyui)], capture_output=True, text=True, timeout=600)
        last = (run.stdout.strip() or run.stderr.strip() or "no output").splitlines()[-1]
        self.step(EQUIVALENCE_STEP, "upstream's free_memory over stand-ins equals one process", run.returncode == 0,
                  last.removeprefix("standin equivalence: "))

    def summary(self):
        passed = sum(self.results)
        failed = len(self.results) - passed
        if failed:
            print("--- the supervisor's log, last lines (ComfyUI's output included) ---", file=sys.stderr)
            for line in self.log_tail():
                print(line, file=sys.stderr)
        print(f"comfyui-check: {passed} passed, {failed} failed", flush=True)
        return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--comfyui", required=True, help="the ComfyUI checkout")
    parser.add_argument("--build", required=True, help="the project's build folder (bin/, lib/)")
    parser.add_argument("--torch-version", default="?")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (config, logs)")
    parser.add_argument("--real-packs", help="a folder of real packs at their commits (real_pack_steps.py)")
    options = parser.parse_args()

    def interrupt(signum, frame):
        raise Interrupted(signal.Signals(signum).name)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupt)

    check = Check(options)
    interrupted = None
    try:
        check.run(options.torch_version)
    except Interrupted as why:
        interrupted = why
        check.say(f"interrupted ({why}); stopping the supervisor and cleaning up")
    finally:
        # No second interruption while cleaning up.
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        check.stop_all()
    status = 130 if interrupted else check.summary()
    check.remove_folder()
    return status

if __name__ == "__main__":
    sys.exit(main())
