"""comfyui-check's steps for real packs (`--real-packs DIR`): public node packs that take or
make ComfyUI's MODEL, each at a fixed commit, run isolated and in one process over the tiny
models (tiny_models/), their outputs compared bit for bit.

Each pack of PACKS runs twice in one ComfyUI: isolated, as pack KEY in a worker of its own
(the config's `python` form: the check's interpreter, the checkout's comfy package, --cpu
and the host's --base-directory, so that its model folders are the host's), and imported
into ComfyUI's own process by a copy of one_process/ as comfyui_check_real_KEY/, its nodes
named PREFIX + name. Each step is one or more prompts (real_packs/graphs.py), each holding
both graphs and the graph without the pack's nodes: the SHA-256 of each output tensor of
the isolated graph must equal the one-process graph's, and differ from the graph without
the pack's nodes. Each step prints one PASS or FAIL line; a FAIL says what differed, or the
error ComfyUI reported for the prompt (the first node that raised).

The check copies no pack and fetches nothing. A user puts the packs in DIR, one folder each
named after its repository, at the commit PACKS names:

    git clone https://github.com/OWNER/NAME DIR/NAME && git -C DIR/NAME checkout COMMIT

The check reads each folder's commit with `git rev-parse HEAD`, not from a file written
beside it: the clone a user makes already records it, nothing can fall out of step with the
code, and a folder at another commit is told apart from the right one. A folder missing,
not a git checkout, or at another commit fails its step in one line naming the folder,
the commit found and the commands above; the other packs run.
"""

import importlib.util
import os
import pathlib
import shutil
import subprocess
from collections import namedtuple

import real_packs.graphs as graphs
from real_packs.ipadapter import write_ipadapter
from real_packs.lora import write_lora
from remote_steps import RemoteSteps, node, short
from support import STUB_BODY

RealPack = namedtuple("RealPack", "number key folder repository commit prefix graphs")
FIRST_STEP = 24
PACKS = [RealPack(FIRST_STEP + index, *row) for index, row in enumerate([
    ("freeu", "FreeU_Advanced", "WASasquatch/FreeU_Advanced", "cf3714d80ced1636d6236ae7ae584be79ca74ced",
     "OneProcessFreeU", graphs.freeu),
    ("rgthree", "rgthree-comfy", "rgthree/rgthree-comfy", "2b9eb36d3e1741e88dbfccade0e08137f7fa2bfb",
     "OneProcessRgthree", graphs.rgthree),
    ("noise", "ComfyUI_Noise", "BlenderNeko/ComfyUI_Noise", "0c9ec19b16dc72334cb8ce82c3774aed183048e4",
     "OneProcessNoise", graphs.noise),
    ("tiled", "ComfyUI_TiledKSampler", "BlenderNeko/ComfyUI_TiledKSampler", "2fd9b05d97ecffc604c642ffbb40220b182966b2",
     "OneProcessTiled", graphs.tiled),
    ("autocfg", "ComfyUI-AutomaticCFG", "Extraltodeus/ComfyUI-AutomaticCFG", "2e395317b65c05a97a0ef566c4a8c7969305dafa",
     "OneProcessAutoCFG", graphs.automatic_cfg),
    ("perturbed", "sd-perturbed-attention", "pamparamm/sd-perturbed-attention",
     "2be8d83fa44dc0f28baf7be8122e57ed5d7165c3", "OneProcessPerturbed", graphs.perturbed_attention),
    ("kjnodes", "ComfyUI-KJNodes", "kijai/ComfyUI-KJNodes", "3fcd22f2fe2be69c3229f192362b91888277cbcb",
     "OneProcessKJ", graphs.kjnodes),
    ("ipadapter", "ComfyUI_IPAdapter_plus", "cubiq/ComfyUI_IPAdapter_plus", "9d076a3df0d2763cef5510ec5ab807f6632c39f5",
     "OneProcessIPA", graphs.ipadapter),
])]
ONE_PROCESS = pathlib.Path(__file__).resolve().parent / "one_process"
# Modules the packs import at load that Debian's Python lacks, used only by nodes no step runs (colorama: the
# coloured console lines of AutomaticCFG's preset nodes; cv2: KJNodes' mask and image nodes). Stubbed as
# support.py stubs ComfyUI's own, in both processes, only where the interpreter lacks them; any use raises.
PACK_STUBS = ("colorama", "cv2")
# torch before 2.1 has no torch.compiler, which KJNodes uses at import only to decorate
# (`@torch.compiler.disable()`): given, in both processes and only where torch lacks it, as
# a decorator that changes nothing, by a sitecustomize in the stubs' folder (which runs the
# interpreter's own sitecustomize first) once torch is imported.
SITECUSTOMIZE = '''"""Written by comfyui-check: torch.compiler.disable for a torch before 2.1, as a
decorator that changes nothing (packs written for a newer torch decorate with it at import)."""
import importlib.util
import os
import sys
import types


def _run_the_interpreters_own():
    here = os.path.dirname(os.path.abspath(__file__))
    for folder in sys.path:
        path = os.path.join(folder or ".", "sitecustomize.py")
        if os.path.abspath(folder or ".") != here and os.path.isfile(path):
            with open(path) as source:
                exec(compile(source.read(), path, "exec"), {"__name__": "sitecustomize", "__file__": path})
            return


def _disable(fn=None, recursive=True):
    return fn if fn is not None else (lambda function: function)


class _AfterTorch:
    """Adds torch.compiler once torch is imported, where torch has none. A query of torch's
    spec (ComfyUI's cuda_malloc makes one) gets the same wrapped loader; the import itself
    takes this finder out."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch" or "torch" in sys.modules:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is not None and spec.loader is not None:
            original = spec.loader.exec_module

            def exec_module(module):
                if self in sys.meta_path:
                    sys.meta_path.remove(self)
                original(module)
                if not hasattr(module, "compiler"):
                    module.compiler = types.SimpleNamespace(disable=_disable)
            spec.loader.exec_module = exec_module
        return spec


_run_the_interpreters_own()
sys.meta_path.insert(0, _AfterTorch())
'''
LORA_FILE = "comfyui-check-tiny-lora.pt"
LORA_SEED = 9
IPADAPTER_FILE = "comfyui-check-tiny-ipadapter.pt"
IPADAPTER_SEED = 10

def torch_has_compiler():
    """Whether the interpreter's torch has torch.compiler (2.1 or later), asked of the
    interpreter the check runs ComfyUI with, which is this one."""
    try:
        import torch
    except ImportError:
        return True  # no torch: ComfyUI cannot start, and says so
    return hasattr(torch, "compiler")


def title(pack):
    return f"{pack.repository} at {pack.commit[:7]} isolated is bit-equal to one process, and its nodes change the output"


def how_to_fetch(pack, folder):
    checkout = f"git -C {folder} checkout {pack.commit}"
    if os.path.isdir(os.path.join(folder, ".git")):
        return f"git -C {folder} fetch origin && {checkout}"
    return f"git clone https://github.com/{pack.repository} {folder} && {checkout}"


def git(folder, *args):
    run = subprocess.run(["git", "-C", folder, *args], capture_output=True, text=True, timeout=30)
    return run.stdout.strip() if run.returncode == 0 else None


def found_commit(folder):
    """The commit `folder` is checked out at, or None with why."""
    if not os.path.isdir(folder):
        return None, "is missing"
    try:
        top, commit = git(folder, "rev-parse", "--show-toplevel"), git(folder, "rev-parse", "HEAD")
    except OSError as error:
        return None, f"cannot be read: git cannot be run ({error.strerror})"
    # A folder inside another checkout (DIR itself in a repository) would read that checkout's commit.
    if top is None or commit is None or os.path.realpath(top) != os.path.realpath(folder):
        return None, "is not a git checkout of its own"
    return commit, None


class RealPackSteps:
    def __init__(self, check, folder):
        self.check = check
        self.folder = os.path.abspath(folder) if folder else None
        self.ready = {}     # key: the pack's folder, for the packs at their commit
        self.problems = {}  # key: why the step does not run
        self.ran = {}       # key: (the class types of its prompts, whether its step passed), for step 37
        self.stubbed = []

    # ---- before the supervisor starts ----

    def prepare(self, nodes, one_process, base, stubs):
        """Copies one_process/ into `nodes` per pack found at its commit and names it in
        `one_process`; the packs' config entries."""
        if self.folder is None:
            return []
        for name in PACK_STUBS:
            if importlib.util.find_spec(name) is None:
                (stubs / name).mkdir()
                (stubs / name / "__init__.py").write_text(STUB_BODY.format(name=name))
                self.stubbed.append(name)
        if not torch_has_compiler():
            (stubs / "sitecustomize.py").write_text(SITECUSTOMIZE)
            self.stubbed.append("torch.compiler")
        entries = []
        for pack in PACKS:
            folder = os.path.join(self.folder, pack.folder)
            commit, why = found_commit(folder)
            if why is None and commit != pack.commit:
                why = f"is at commit {commit[:12]}, not {pack.commit[:12]}"
            if why is not None:
                self.problems[pack.key] = f"not run: {folder} {why}; run: {how_to_fetch(pack, folder)}"
                continue
            self.ready[pack.key] = folder
            copy = f"comfyui_check_real_{pack.key}"
            shutil.copytree(ONE_PROCESS, nodes / copy)
            one_process[copy] = [folder, pack.prefix]
            entries.append({"name": pack.key,
                            "python": {"pack": folder, "interpreter": self.check.python,
                                       "comfyui_args": ["--cpu", "--base-directory", str(base)]},
                            "env": {"PYTHONPATH": str(stubs), "PYTHONDONTWRITEBYTECODE": "1"},
                            "restart": {"max_restarts": 0}})
        self.loras = base / "models" / "loras"
        if "ipadapter" in self.ready:
            write_ipadapter(str(base / "models" / "ipadapter" / IPADAPTER_FILE), IPADAPTER_SEED)
        return entries

    def describe(self):
        """One line for the check's start: where the packs are and which run."""
        if self.folder is None:
            return None
        return (f"real packs in {self.folder}: {len(self.ready)} of {len(PACKS)} at their commits"
                + (f" (not: {', '.join(sorted(self.problems))})" if self.problems else "")
                + (f"; stubbed for them (not installed): {', '.join(self.stubbed)}" if self.stubbed else ""))

    def steps(self):
        return [(pack.number, title(pack)) for pack in PACKS] if self.folder else []

    # ---- the steps ----

    def run(self):
        if self.folder is None:
            return
        for pack in PACKS:
            if pack.key in self.problems:
                self.check.step(pack.number, title(pack), False, self.problems[pack.key])
                continue
            failed = self.worker_failed(pack)
            if failed:
                self.check.step(pack.number, title(pack), False, failed)
                continue
            context, why = self.context(pack)
            if why:
                self.check.step(pack.number, title(pack), False, why)
                continue
            parts = pack.graphs(pack.prefix, context)
            outcomes = [self.part(pack, part) for part in parts]
            self.ran[pack.key] = ({node["class_type"] for part in parts for node in part.prompt.values()},
                                  all(ok for ok, _ in outcomes))
            self.check.step(pack.number, title(pack), all(ok for ok, _ in outcomes),
                            f"{'; '.join(seen for _, seen in outcomes)} ({RemoteSteps(self.check).worker(pack.key)})")

    def worker_failed(self, pack):
        """Why the pack's worker is failed (the supervisor's line: its import's error), or None."""
        if not any(w.get("name") == pack.key and w.get("state") == "failed" for w in self.check.workers()):
            return None
        lines = self.check.log_lines(f"{pack.key}: failed: ")
        return f"not run: pack {pack.key}'s worker " + (lines[0].split(f"{pack.key}: ", 1)[1] if lines else "is failed")

    def context(self, pack):
        """What the pack's graphs need beyond the tiny models: IPAdapter's file (written by
        prepare), rgthree's LoRA file (written here: its shapes come from the checkpoint)."""
        if pack.key != "rgthree":
            return {"ipadapter": IPADAPTER_FILE}, None
        checkpoint = RemoteSteps(self.check).tiny_models().get("checkpoint")
        if not checkpoint:
            # No earlier step built the tiny models: a prompt of their node alone writes the checkpoint.
            prompt = {"tiny": node("ComfySupervisorCheckTinyModels", seed=1),
                      "pos": node("CLIPTextEncode", clip=["tiny", 1], text=""),
                      "shown": node("ComfySupervisorCheckDigest", label="tiny", conditioning=["pos", 0])}
            _, _, failure = self.check.run_prompt(prompt)
            checkpoint = RemoteSteps(self.check).tiny_models().get("checkpoint")
            if not checkpoint:
                return None, f"not run: the tiny models' checkpoint, which the LoRA's shapes come from, was not written ({failure})"
        layers = write_lora(checkpoint, str(self.loras / LORA_FILE), LORA_SEED)
        return {"lora": LORA_FILE, "layers": layers}, None

    def part(self, pack, part):
        """Runs one part's prompt: (ok, what it saw, led by the part's label)."""
        found, finite, failure = RemoteSteps(self.check).digests(part.prompt)
        if found is None:
            # The first line: ComfyUI's message carries the worker's traceback after it.
            return False, f"{part.label}: {failure.splitlines()[0]}"
        seen, ok = [], all(finite)
        for isolated, one in part.pairs:
            equal = bool(found.get(isolated)) and found.get(isolated) == found.get(one)
            ok = ok and equal
            seen.append(f"{isolated} {short(found.get(isolated))} {'==' if equal else '!='} {one} "
                        f"{short(found.get(one))}" + ("" if equal else differing(found.get(isolated), found.get(one))))
        for patched, plain in part.changed:
            differ = found.get(patched) != found.get(plain)
            ok = ok and differ
            seen.append(f"{plain} {short(found.get(plain))} "
                        f"{'differs' if differ else 'is the same: the pack did nothing'}")
        if not all(finite):
            seen.append("a tensor is not finite")
        return ok, f"{part.label}: {', '.join(seen)}"


def differing(isolated, one):
    """Which tensors of two digest nodes differ, by name, for a FAIL line."""
    names = [name for (name, sha, _, _), other in zip(isolated or (), one or ()) if (name, sha) != other[:2]]
    return f" (differ: {', '.join(names)})" if names else ""
